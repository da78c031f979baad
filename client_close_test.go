package taskorch_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// listeners counts the sessions on database name that listen for task notifications (Wait's
// connection), as the server sees them; connections counts every session on it.
func listeners(t *testing.T, admin *pgxpool.Pool, name string) (listening, connections int) {
	t.Helper()
	require.NoError(t, admin.QueryRow(t.Context(), `select count(*) filter (where query = 'listen taskorch_task_done'), count(*)
		from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`, name).Scan(&listening, &connections))
	return listening, connections
}

// Close closes Wait's LISTEN connection at once (without it, the connection lingers after the
// last Wait), ends a Wait in progress with ErrClientClosed, makes every later call fail with
// ErrClientClosed, and leaves the pool to its owner: once the pool is closed too, no session of
// the client remains on the server.
func TestClientClose(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	admin, err := pgxpool.New(ctx, dbtest.AdminURL(t))
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	var name string
	require.NoError(t, pool.QueryRow(ctx, `select current_database()`).Scan(&name))
	client, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)

	// A Wait for a task that is finished already returns at once; its LISTEN connection stays.
	done, err := client.Enqueue(ctx, raw("close_me", `{}`), nil)
	require.NoError(t, err)
	_, err = client.Cancel(ctx, done.TaskID)
	require.NoError(t, err)
	task, err := client.Wait(ctx, done.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusCancelled, task.Status)
	n, _ := listeners(t, admin, name)
	require.Equal(t, 1, n, "Wait's LISTEN connection lingers after the Wait")

	// A Wait in progress when Close is called returns ErrClientClosed.
	pending, err := client.Enqueue(ctx, raw("close_me", `{}`), nil)
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() {
		_, err := client.Wait(ctx, pending.TaskID)
		waited <- err
	}()
	require.Eventually(t, func() bool { // registered: queues.watch_task recorded the waiter
		var n int
		require.NoError(t, pool.QueryRow(ctx, `select count(*) from queues.task_waiter where task_id = $1`, pending.TaskID).Scan(&n))
		return n > 0
	}, 20*time.Second, 10*time.Millisecond)

	require.NoError(t, client.Close())
	select {
	case err := <-waited:
		require.ErrorIs(t, err, taskorch.ErrClientClosed)
	case <-time.After(20 * time.Second):
		t.Fatal("a Wait in progress did not return after Close")
	}
	require.Eventually(t, func() bool {
		n, _ := listeners(t, admin, name)
		return n == 0
	}, 20*time.Second, 10*time.Millisecond, "Close closes Wait's LISTEN connection")
	require.NoError(t, pool.Ping(ctx), "Close leaves the pool open")
	require.NoError(t, client.Close(), "a second Close does nothing")

	// Every later call fails, clearly.
	_, err = client.Enqueue(ctx, raw("close_me", `{}`), nil)
	require.ErrorIs(t, err, taskorch.ErrClientClosed)
	_, err = client.Wait(ctx, pending.TaskID)
	require.ErrorIs(t, err, taskorch.ErrClientClosed)
	_, err = client.Get(ctx, pending.TaskID)
	require.ErrorIs(t, err, taskorch.ErrClientClosed)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	_, err = client.EnqueueTx(ctx, tx, raw("close_me", `{}`), nil)
	require.ErrorIs(t, err, taskorch.ErrClientClosed)
	require.ErrorIs(t, client.SetLimit(ctx, &taskorch.LimitParams{TaskType: "close_me", MaxRunning: 1}), taskorch.ErrClientClosed)
	_, err = client.Signal(ctx, "s", "k", nil)
	require.ErrorIs(t, err, taskorch.ErrClientClosed)
	require.Equal(t, "taskorch: the client is closed", taskorch.ErrClientClosed.Error())
	require.NoError(t, tx.Rollback(ctx))

	pool.Close()
	require.Eventually(t, func() bool {
		_, n := listeners(t, admin, name)
		return n == 0
	}, 20*time.Second, 10*time.Millisecond, "no session of the client or its pool remains")
}
