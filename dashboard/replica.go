package dashboard

import (
	"context"
	"fmt"
	"time"
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

// replicaLag says how far behind Config.ReadPool is: the WAL the primary has written that the
// replica has not replayed yet, and how long ago it replayed its last transaction. Nil without a
// ReadPool.
func (h *Handler) replicaLag(ctx context.Context) *replicaStatus {
	if h.cfg.ReadPool == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, replicaLagTimeout)
	defer cancel()
	var standby bool
	var replayed *string
	var ago *float64
	if err := h.cfg.ReadPool.QueryRow(ctx, `select pg_is_in_recovery(), pg_last_wal_replay_lsn()::text,
		extract(epoch from clock_timestamp() - pg_last_xact_replay_timestamp())::float8`).Scan(&standby, &replayed, &ago); err != nil {
		h.cfg.Logger.Warn("dashboard: cannot read the replica's lag", "error", err)
		return &replicaStatus{Text: "Reading from a replica whose lag cannot be read now; figures may be old.", Warn: true}
	}
	if !standby || replayed == nil {
		return &replicaStatus{Text: "Reading from the read database, which is not a standby: it is as current as the primary."}
	}
	var behind int64
	if err := h.pool.QueryRow(ctx, `select pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, *replayed).Scan(&behind); err != nil {
		h.cfg.Logger.Warn("dashboard: cannot read the primary's WAL position", "error", err)
		return &replicaStatus{Text: "Reading from a replica; the primary's position cannot be read now, so its lag is unknown.", Warn: true}
	}
	if behind <= 0 {
		return &replicaStatus{Text: "Reading from a replica: caught up with the primary."}
	}
	text := "Reading from a replica: " + walBytes(behind) + " of WAL behind the primary"
	warn := behind > replicaWarnBytes
	if ago != nil {
		since := time.Duration(*ago * float64(time.Second))
		text += ", last transaction replayed " + shortDuration(since) + " ago"
		warn = warn || since > replicaWarnAfter
	}
	return &replicaStatus{Text: text + ".", Warn: warn}
}

// A replica is shown as lagging (in the warning colour) past these: a busy replica is always a
// little behind, which is no news.
const (
	replicaWarnBytes = 16 << 20
	replicaWarnAfter = 5 * time.Second
)

// walBytes shows a WAL distance: 512 B, 12.3 kB, 4.5 MB, 1.2 GB.
func walBytes(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n < 1_000_000_000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	default:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	}
}
