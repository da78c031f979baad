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

// An enqueue notifies only while a worker says it waits (queues.worker_waiting), and once per
// such announcement: the first enqueueing statement after it answers, however many rows it
// inserts, and the next ones stay silent until a worker announces again.
func TestEnqueueNotifiesOnlyAWaitingWorker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := dbtest.NewDBURL(t)
	listener, conn := listenerAndConn(ctx, t, url)

	// No worker has said it waits: nothing is notified.
	_, err := conn.Exec(ctx, `select queues.enqueue_many(array_fill('n'::text, array[1000]), array_fill('{}'::jsonb, array[1000]))`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `select queues.enqueue('n', '{}')`)
	require.NoError(t, err)
	require.Equal(t, 0, wakeupsBeforeMarker(ctx, t, listener, conn))

	// A worker waits: 1,000 tasks in one statement notify once, and the enqueue after them not at
	// all (the worker is woken already).
	require.True(t, scalar[bool](t, conn, `select queues.worker_waiting()`), "no enqueue is in flight")
	_, err = conn.Exec(ctx, `select queues.enqueue_many(array_fill('n'::text, array[1000]), array_fill('{}'::jsonb, array[1000]))`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `select queues.enqueue('n', '{}')`)
	require.NoError(t, err)
	require.Equal(t, 1, wakeupsBeforeMarker(ctx, t, listener, conn))

	// Every enqueue path answers the same way: Go's Enqueue, EnqueueTx and EnqueueMany (which
	// call queues.insert_task and insert_tasks for tasks that name no function), and the
	// SQL functions.
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	params := make([]taskorch.EnqueueParams, 500)
	for i := range params {
		params[i] = taskorch.EnqueueParams{Args: raw("n", `{}`)}
	}
	for name, enqueue := range map[string]func() error{
		"EnqueueMany": func() error { _, err := c.EnqueueMany(ctx, params); return err },
		"Enqueue":     func() error { _, err := c.Enqueue(ctx, raw("n", `{}`), nil); return err },
		"EnqueueTx": func() error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { _, err := c.EnqueueTx(ctx, tx, raw("n", `{}`), nil); return err })
		},
		"enqueue_debounced": func() error {
			_, err := conn.Exec(ctx, `select queues.enqueue_debounced('n', '{}', 'k', interval '1 minute')`)
			return err
		},
		"enqueue_with_result": func() error {
			_, err := conn.Exec(ctx, `select queues.enqueue_with_result('n', '{}')`)
			return err
		},
	} {
		require.True(t, scalar[bool](t, conn, `select queues.worker_waiting()`), name)
		require.NoError(t, enqueue(), name)
		require.NoError(t, enqueue(), name)
		require.Equal(t, 1, wakeupsBeforeMarker(ctx, t, listener, conn), name)
	}
}

// An enqueue whose transaction rolls back notifies no one; the next enqueue answers the waiting
// worker instead only if the rolled-back one had not: an answer recorded by a transaction that
// rolls back silences the enqueues after it until the worker announces again, which is the case
// docs/worker.md bounds by the worker's poll.
func TestEnqueueRolledBackNotifiesNoOne(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := dbtest.NewDBURL(t)
	listener, conn := listenerAndConn(ctx, t, url)

	require.True(t, scalar[bool](t, conn, `select queues.worker_waiting()`))
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `select queues.enqueue('n', '{}')`)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, 0, wakeupsBeforeMarker(ctx, t, listener, conn))
	require.Zero(t, scalar[int64](t, conn, `select count(*) from queues.task`))

	// The worker's next announcement is answered again.
	require.True(t, scalar[bool](t, conn, `select queues.worker_waiting()`))
	_, err = conn.Exec(ctx, `select queues.enqueue('n', '{}')`)
	require.NoError(t, err)
	require.Equal(t, 1, wakeupsBeforeMarker(ctx, t, listener, conn))
}

// With queues.settings.notify_coalesce_ms set, enqueues inside the window share one NOTIFY even
// when a worker announces in between, and the tasks whose enqueue skipped it are still claimed:
// the worker polls.
func TestEnqueueNotifyCoalesced(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := dbtest.NewDBURL(t)
	listener, conn := listenerAndConn(ctx, t, url)

	// A window of a minute: three enqueues from two sessions, each after an announcement, one
	// notification.
	_, err := conn.Exec(ctx, `update queues.settings set notify_coalesce_ms = 60000`)
	require.NoError(t, err)
	var ids [3]int64
	for i, db := range []*pgx.Conn{conn, listener, conn} {
		require.True(t, scalar[bool](t, conn, `select queues.worker_waiting()`))
		require.NoError(t, db.QueryRow(ctx, `select queues.enqueue('n', '{}')`).Scan(&ids[i]))
	}
	require.Equal(t, 1, wakeupsBeforeMarker(ctx, t, listener, conn))

	// An idle worker runs all three, polling for those no notification announced.
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

	// A stamp an hour ahead (the clock went back): the next enqueue to a waiting worker
	// notifies all the same. From here the worker is running and announces too: its own try of
	// the lock may make ours come back false at the same moment, but the announcement (the bump)
	// is made either way, so only the notifications are checked.
	_, err = conn.Exec(ctx, `select setval('internal.task_notify_clock',
		(extract(epoch from clock_timestamp()) * 1000)::bigint + 3600000)`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `select queues.worker_waiting()`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `select queues.enqueue('n', '{}')`)
	require.NoError(t, err)
	require.Positive(t, wakeupsBeforeMarker(ctx, t, listener, conn))

	// Back to 0, the default: each announcement is answered at once.
	_, err = conn.Exec(ctx, `update queues.settings set notify_coalesce_ms = 0`)
	require.NoError(t, err)
	for range 2 {
		_, err = conn.Exec(ctx, `select queues.worker_waiting()`)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `select queues.enqueue('n', '{}')`)
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, wakeupsBeforeMarker(ctx, t, listener, conn), 2)
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
