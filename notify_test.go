package taskorch_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/dbtest"
)

// Enqueueing wakes idle workers with one NOTIFY per statement, not one per row.
func TestEnqueueNotifiesOncePerStatement(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := dbtest.NewDBURL(t)
	listener, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer listener.Close(context.Background())
	_, err = listener.Exec(ctx, `listen taskorch_task`)
	require.NoError(t, err)

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	// 1,000 tasks in one statement, then one task alone, then a marker: notifications arrive in
	// commit order, so everything before the marker is what the two enqueues sent.
	_, err = conn.Exec(ctx, `select queues.enqueue_many(array_fill('n'::text, array[1000]), array_fill('{}'::jsonb, array[1000]))`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `select queues.enqueue('n', '{}')`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `select pg_notify('taskorch_task', 'marker')`)
	require.NoError(t, err)

	wakeups := 0
	for {
		n, err := listener.WaitForNotification(ctx)
		require.NoError(t, err)
		if n.Payload == "marker" {
			break
		}
		wakeups++
	}
	require.Equal(t, 2, wakeups)

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
	_, err = conn.Exec(ctx, `select pg_notify('taskorch_task', 'marker')`)
	require.NoError(t, err)
	wakeups = 0
	for {
		n, err := listener.WaitForNotification(ctx)
		require.NoError(t, err)
		if n.Payload == "marker" {
			break
		}
		wakeups++
	}
	require.Equal(t, 1, wakeups)
}
