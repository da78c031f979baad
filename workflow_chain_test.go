package taskorch_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// A chain of 100 tasks, each enqueued after the one before in one transaction, run by a real
// worker with a Go handler: each runs once, only after its parent completed (the handler sees
// its parent completed and itself as the next link), and the chain ends completed.
func TestWorkflowChain100(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	const n = 100
	ids := make([]int64, n)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for i := range ids {
			var opts *taskorch.EnqueueOpts
			if i > 0 {
				opts = &taskorch.EnqueueOpts{After: []int64{ids[i-1]}}
			}
			r, err := c.EnqueueTx(ctx, tx, raw("wf.link", `{}`), opts)
			require.NoError(t, err)
			ids[i] = r.TaskID
		}
		return nil
	}))
	require.Equal(t, n-1, scalar[int](t, pool, `select count(*) from queues.task where status = 'waiting'`))

	var mu sync.Mutex
	var ran []int64
	var parentStatus []string
	hs := taskorch.NewHandlers()
	hs.HandleFunc("wf.link", func(ctx context.Context, task *taskorch.Task) error {
		var s string
		err := pool.QueryRow(ctx, `select coalesce((select p.status::text from queues.task c
			join queues.task p on p.task_id = c.after_ids[1] where c.task_id = $1), 'root')`, task.ID).Scan(&s)
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, task.ID)
		parentStatus = append(parentStatus, s)
		return err
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})
	waitStatus(t, pool, ids[n-1], taskorch.StatusCompleted)

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, ids, ran)
	require.Equal(t, "root", parentStatus[0])
	for i := 1; i < n; i++ {
		require.Equal(t, "completed", parentStatus[i], "link %d ran before its parent completed", i)
	}
	require.Equal(t, n, scalar[int](t, pool, `select count(*) from queues.task where status = 'completed' and attempt = 1`))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_edge`))
}
