package maintenance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/internal/testing/pgbouncertest"
)

// A session opened through a transaction pooler (a misconfiguration: such a worker should be
// PollOnly or LISTEN on a direct connection) would leave its lock on a server connection the
// pooler shares, which says nothing of the worker and goes whenever the pooler closes it. The
// worker finds out when its session's server connection changes (a real PgBouncer, another
// client holding the first one), and goes on without a session: registered again without one,
// found dead by its heartbeats alone.
func TestSessionThroughATransactionPooler(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	direct := dbtest.NewDBURL(t)
	b := pgbouncertest.Start(t, direct, pgbouncertest.Options{PoolSize: 4})
	pooledCfg, err := pgx.ParseConfig(b.URL(direct))
	require.NoError(t, err)
	pooledCfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	pool := openTestPool(t, direct)

	ev := newEvents()
	cfg := testConfig("w-pooled", ev)
	cfg.Session = func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, pooledCfg) }
	m := start(t, pool, cfg)
	ev.wait(t, "registered", kindOf("w-pooled", EventRegistered))
	pid := scalar[int32](t, pool, `select session_pid from queues.worker where worker_id = 'w-pooled'`)

	// Other clients of the pooler take server connections and keep them, until one of them has
	// the session's: its next check then runs on another.
	for i := 0; ; i++ {
		require.Less(t, i, 3, "no client of the pooler got the session's server connection")
		c, err := pgx.ConnectConfig(ctx, pooledCfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(context.WithoutCancel(ctx)) })
		tx, err := c.Begin(ctx)
		require.NoError(t, err)
		var got int32
		require.NoError(t, tx.QueryRow(ctx, `select pg_backend_pid()`).Scan(&got))
		if got == pid {
			break
		}
	}
	_, lost := ev.wait(t, "session lost", kindOf("w-pooled", EventSessionLost))
	require.True(t, errors.Is(lost.Err, errPooledSession), "%v", lost.Err)
	from := 0
	ev.waitFrom(t, &from, "registered", kindOf("w-pooled", EventRegistered))
	_, again := ev.waitFrom(t, &from, "registered again", kindOf("w-pooled", EventRegistered))
	require.True(t, again.Reregistered)
	require.False(t, m.hasSession())
	require.True(t, scalar[bool](t, pool, `select session_key is null from queues.worker where worker_id = 'w-pooled'`))
	n := ev.count(kindOf("w-pooled", EventHeartbeat))
	require.Eventually(t, func() bool { return ev.count(kindOf("w-pooled", EventHeartbeat)) > n+2 }, waitTimeout, 5*time.Millisecond,
		"it goes on heartbeating")
}
