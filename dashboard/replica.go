package dashboard

import (
	"context"
	"time"

	"github.com/taskorch/taskorch/internal/admin"
)

// replicaStatus is what every page says about the replica it reads from (Config.ReadPool).
type replicaStatus struct {
	Text string
	// Warn: the replica is well behind, or could not be asked; the page's figures may be old.
	Warn bool
}

// replicaLagTimeout bounds the two small queries that measure the lag, so a page is never held
// up by them.
const replicaLagTimeout = 2 * time.Second

// A replica is shown as lagging (in the warning colour) past these: a busy replica is always a
// little behind, which is no news.
const (
	replicaWarnBytes = 16 << 20
	replicaWarnAfter = 5 * time.Second
)

// replicaLag says how far behind Config.ReadPool is. Nil without a ReadPool.
func (h *Handler) replicaLag(ctx context.Context) *replicaStatus {
	if h.cfg.ReadPool == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, replicaLagTimeout)
	defer cancel()
	l, err := admin.ReadReplicaLag(ctx, h.pool, h.cfg.ReadPool)
	switch {
	case err != nil:
		h.cfg.Logger.Warn("dashboard: cannot read the replica's lag", "error", err)
		return &replicaStatus{Text: "Reading from a replica whose lag cannot be read now; figures may be old.", Warn: true}
	case !l.Standby:
		return &replicaStatus{Text: "Reading from the read database, which is not a standby: it is as current as the primary."}
	}
	warn := l.BehindBytes > replicaWarnBytes || (l.BehindBytes > 0 && l.LastReplay != nil && *l.LastReplay > replicaWarnAfter)
	return &replicaStatus{Text: "Reading from a replica: " + l.String() + ".", Warn: warn}
}
