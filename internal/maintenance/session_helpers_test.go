package maintenance

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// sessionGate opens the sessions of one test worker (Config.Session): direct connections to
// the pool's database, refused while the test blocks them (a worker whose process is gone, or
// cut off from the database, cannot open another).
type sessionGate struct {
	cfg     *pgx.ConnConfig
	blocked atomic.Bool
	opened  atomic.Int64
}

func newSessionGate(pool *pgxpool.Pool) *sessionGate {
	return &sessionGate{cfg: pool.Config().ConnConfig.Copy()}
}

// open is a Config.Session.
func (g *sessionGate) open(ctx context.Context) (*pgx.Conn, error) {
	if g.blocked.Load() {
		return nil, errors.New("the test blocks this worker's sessions")
	}
	c, err := pgx.ConnectConfig(ctx, g.cfg)
	if err == nil {
		g.opened.Add(1)
	}
	return c, err
}

func (g *sessionGate) block()   { g.blocked.Store(true) }
func (g *sessionGate) unblock() { g.blocked.Store(false) }

// withSession returns cfg with a session opened through a new gate, and the gate.
func withSession(pool *pgxpool.Pool, cfg Config) (Config, *sessionGate) {
	g := newSessionGate(pool)
	cfg.Session = g.open
	return cfg, g
}

// cutSession ends worker id's session on the server (pg_terminate_backend), as a cut
// connection or a dead process would, and returns the session key it had.
func cutSession(t testing.TB, db DB, id string) int32 {
	t.Helper()
	var key, pid int32
	require.NoError(t, db.QueryRow(t.Context(),
		`select session_key, session_pid from queues.worker where worker_id = $1`, id).Scan(&key, &pid))
	require.True(t, scalar[bool](t, db, `select pg_terminate_backend($1)`, pid))
	return key
}

// claimFor claims up to n tasks for worker id and returns their ids and lease ids.
func claimFor(t testing.TB, db DB, id string, n int) (tasks, leases []int64) {
	t.Helper()
	rows, err := db.Query(t.Context(), `select task_id, lease_id from queues.claim_tasks($1, $2) order by task_id`, id, n)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var task, lease int64
		require.NoError(t, rows.Scan(&task, &lease))
		tasks, leases = append(tasks, task), append(leases, lease)
	}
	require.NoError(t, rows.Err())
	return tasks, leases
}

// enqueueN enqueues n tasks of type typ.
func enqueueN(t testing.TB, db DB, typ string, n int) {
	t.Helper()
	mustExec(t, db, `select queues.enqueue($1, '{}') from generate_series(1, $2)`, typ, n)
}

// reapedBy matches an EventReaped from leader that recovered worker victim's tasks by cause.
func reapedBy(leader, victim, cause string) func(string, Event) bool {
	return func(who string, e Event) bool {
		if who != leader || e.Kind != EventReaped {
			return false
		}
		for _, w := range e.Workers {
			if w.WorkerID == victim && w.Cause == cause {
				return true
			}
		}
		return false
	}
}

// openTestPool opens a pool on url, closed when the test ends.
func openTestPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}
