package taskorch_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// Enqueueing wakes idle workers with one NOTIFY per statement, not one per row.
func TestEnqueueNotifiesOncePerStatement(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := dbtest.NewDBURL(t)
	listener, conn := listenerAndConn(ctx, t, url)
	// 1,000 tasks in one statement, then one task alone: two notifications.
	_, err := conn.Exec(ctx, `select queues.enqueue_many(array_fill('n'::text, array[1000]), array_fill('{}'::jsonb, array[1000]))`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `select queues.enqueue('n', '{}')`)
	require.NoError(t, err)
	require.Equal(t, 2, wakeupsBeforeMarker(ctx, t, listener, conn))

	// Go's EnqueueMany is one statement too.
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	params := make([]taskorch.EnqueueParams, 500)
	for i := range params {
		params[i] = taskorch.EnqueueParams{Args: raw("n", `{}`)}
	}
	_, err = c.EnqueueMany(ctx, params)
	require.NoError(t, err)
	require.Equal(t, 1, wakeupsBeforeMarker(ctx, t, listener, conn))
}

// With queues.settings.notify_coalesce_ms set, enqueues inside the window share one NOTIFY, and
// the tasks whose enqueue skipped it are still claimed: the worker polls.
func TestEnqueueNotifyCoalesced(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := dbtest.NewDBURL(t)
	listener, conn := listenerAndConn(ctx, t, url)

	// An idle worker, woken by the first enqueue at most: it still runs all three, polling.
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close) // after the worker stops
	ran := make(chan int64, 3)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("n", func(_ context.Context, task *taskorch.Task) error {
		ran <- task.ID
		return nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})

	// A window of a minute: three enqueues from two sessions, one notification.
	_, err = conn.Exec(ctx, `update queues.settings set notify_coalesce_ms = 60000`)
	require.NoError(t, err)
	var ids [3]int64
	for i, db := range []*pgx.Conn{conn, listener, conn} {
		require.NoError(t, db.QueryRow(ctx, `select queues.enqueue('n', '{}')`).Scan(&ids[i]))
	}
	require.Equal(t, 1, wakeupsBeforeMarker(ctx, t, listener, conn))

	got := make([]int64, 0, len(ids))
	for range ids {
		select {
		case id := <-ran:
			got = append(got, id)
		case <-ctx.Done():
			t.Fatalf("ran %v of %v", got, ids)
		}
	}
	require.ElementsMatch(t, ids[:], got)

	// A stamp an hour ahead (the clock went back): the next enqueue notifies all the same.
	_, err = conn.Exec(ctx, `select setval('internal.task_notify_clock',
		(extract(epoch from clock_timestamp()) * 1000)::bigint + 3600000)`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `select queues.enqueue('n', '{}')`)
	require.NoError(t, err)
	require.Equal(t, 1, wakeupsBeforeMarker(ctx, t, listener, conn))

	// Back to 0, the default: every statement notifies again.
	_, err = conn.Exec(ctx, `update queues.settings set notify_coalesce_ms = 0`)
	require.NoError(t, err)
	for range 2 {
		_, err = conn.Exec(ctx, `select queues.enqueue('n', '{}')`)
		require.NoError(t, err)
	}
	require.Equal(t, 2, wakeupsBeforeMarker(ctx, t, listener, conn))
}

// wakeupsBeforeMarker sends a marker notification from conn and counts what listener receives
// before it. Notifications arrive in commit order, so that is what was sent before the marker.
func wakeupsBeforeMarker(ctx context.Context, t *testing.T, listener, conn *pgx.Conn) int {
	t.Helper()
	_, err := conn.Exec(ctx, `select pg_notify('taskorch_task', 'marker')`)
	require.NoError(t, err)
	wakeups := 0
	for {
		n, err := listener.WaitForNotification(ctx)
		require.NoError(t, err)
		if n.Payload == "marker" {
			return wakeups
		}
		wakeups++
	}
}

// listenerAndConn opens two connections: one listening on taskorch_task, one to enqueue from.
// Both close when the test ends.
func listenerAndConn(ctx context.Context, t *testing.T, url string) (listener, conn *pgx.Conn) {
	t.Helper()
	listener, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = listener.Close(context.Background()) })
	_, err = listener.Exec(ctx, `listen taskorch_task`)
	require.NoError(t, err)
	conn, err = pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return listener, conn
}
