// Package failover keeps a process from writing to a former primary that came back after a
// failover (docs/operations.md, "Failover").
//
// After a standby is promoted, the old primary's data directory still says "primary". Started
// again (a machine that reboots, an operator's pg_ctl start), it accepts writes on the timeline
// it had, beside the new primary on the next timeline, and a multi-host URL with
// target_session_attrs=read-write accepts whichever host answers first. Failover managers fence
// it or rejoin it as a standby; a Guard is the client's own line of defence: a
// process that has written on timeline N refuses every server on a timeline below N.
package failover

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
)

// timelineQuery returns the name of the WAL file being written, whose first 8 hex digits are the
// server's current timeline. The functions are executable by every role, unlike
// pg_control_checkpoint, and the timeline changes at promotion, before the first checkpoint.
const timelineQuery = `select pg_walfile_name(pg_current_wal_lsn())`

// Guard remembers the newest timeline its process has connected to.
type Guard struct {
	log    *slog.Logger
	mu     sync.Mutex
	newest uint64
	host   string // the host that was on newest
}

// NewGuard returns a Guard that has seen no timeline yet; log (nil: discard) hears of the
// servers it refuses and of the failovers it notices.
func NewGuard(log *slog.Logger) *Guard {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Guard{log: log}
}

// Install makes every connection cfg opens check the server's timeline once it has passed
// cfg's own checks: a server on an older timeline than one this Guard has seen is refused,
// and pgx goes on to the URL's next host. Install does nothing and returns false unless cfg
// asks for a writable server (target_session_attrs=read-write or primary): a URL without it
// may point at a standby on purpose. A process that starts while only the former primary
// answers cannot tell; fencing it is the failover manager's job.
func (g *Guard) Install(cfg *pgconn.Config) bool {
	validate := cfg.ValidateConnect
	if validate == nil {
		return false
	}
	cfg.ValidateConnect = func(ctx context.Context, conn *pgconn.PgConn) error {
		if err := validate(ctx, conn); err != nil {
			return err
		}
		return g.check(ctx, conn)
	}
	return true
}

// Newest is the newest timeline seen, 0 before the first connection.
func (g *Guard) Newest() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.newest
}

// check reads conn's timeline and refuses it when it is older than the newest seen.
func (g *Guard) check(ctx context.Context, conn *pgconn.PgConn) error {
	res, err := conn.Exec(ctx, timelineQuery).ReadAll()
	if err != nil {
		return fmt.Errorf("read the server's timeline: %w", err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 1 {
		return fmt.Errorf("read the server's timeline: unexpected result")
	}
	tl, err := parseTimeline(string(res[0].Rows[0][0]))
	if err != nil {
		return err
	}
	host := conn.Conn().RemoteAddr().String()
	g.mu.Lock()
	defer g.mu.Unlock()
	if tl < g.newest {
		g.log.Warn("refusing a former primary: it accepts writes on an older timeline than a server this process has written to (it came back after a failover); trying the next host",
			"host", host, "timeline", tl, "newest_timeline", g.newest, "newest_host", g.host)
		return &FormerPrimaryError{Timeline: tl, Newest: g.newest}
	}
	if tl > g.newest {
		if g.newest != 0 {
			g.log.Info("connected to a primary on a newer timeline (a failover happened)",
				"host", host, "timeline", tl, "previous_timeline", g.newest)
		}
		g.newest, g.host = tl, host
	}
	return nil
}

// FormerPrimaryError is the error a refused server's connection attempt fails with.
type FormerPrimaryError struct {
	Timeline, Newest uint64
}

func (e *FormerPrimaryError) Error() string {
	return fmt.Sprintf("a former primary: this server writes on timeline %d, and a server on timeline %d has been promoted since", e.Timeline, e.Newest)
}

// parseTimeline reads the timeline from a WAL file name (TTTTTTTTXXXXXXXXYYYYYYYY).
func parseTimeline(walFile string) (uint64, error) {
	if len(walFile) != 24 {
		return 0, fmt.Errorf("read the server's timeline: %q is not a WAL file name", walFile)
	}
	tl, err := strconv.ParseUint(walFile[:8], 16, 32)
	if err != nil {
		return 0, fmt.Errorf("read the server's timeline: %q is not a WAL file name", walFile)
	}
	return tl, nil
}
