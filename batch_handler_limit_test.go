package taskorch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// Batches are made of claimed tasks, so a running limit holds: with a limit of 2 running tasks of
// the type, no call holds more than 2 tasks, and while a call runs, the database has at most 2
// tasks of the type running, the call's tasks among them under the leases the call holds. A
// MaxWait keeps batches open for more tasks, which the limit does not let the worker claim.
func TestBatchHandlerHonoursRunningLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: batchItem{}.TaskType(), MaxRunning: 2}))
	ids := enqueueItems(t, c, 9, nil, nil)

	type seen struct {
		size, running, leased int
		err                   error
	}
	var mu sync.Mutex
	var calls []seen
	startBatchWorker(t, pool, func(ctx context.Context, tasks []*taskorch.TaskFor[batchItem]) []error {
		taskIDs, leases := make([]int64, len(tasks)), make([]int64, len(tasks))
		for i, task := range tasks {
			taskIDs[i], leases[i] = task.ID, *task.LeaseID
		}
		s := seen{size: len(tasks)}
		s.err = pool.QueryRow(ctx, `select count(*) filter (where status = 'running'),
				count(*) filter (where status = 'running' and task_id = any($2) and lease_id = any($3))
			from queues.task where task_type = $1`, batchItem{}.TaskType(), taskIDs, leases).Scan(&s.running, &s.leased)
		mu.Lock()
		calls = append(calls, s)
		mu.Unlock()
		return make([]error, len(tasks))
	}, &taskorch.BatchOpts{MaxWait: 20 * time.Millisecond}, &taskorch.WorkerConfig{Concurrency: 10})

	for _, id := range ids {
		waitStatus(t, pool, id, taskorch.StatusCompleted)
	}
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, s := range calls {
		require.NoError(t, s.err)
		require.LessOrEqual(t, s.size, 2, "a call holds no more tasks than the limit lets run")
		require.LessOrEqual(t, s.running, 2, "the database never has more than the limit running")
		require.Equal(t, s.size, s.leased, "each task of a call runs under the lease the call holds")
		total += s.size
	}
	require.Equal(t, len(ids), total, "each task ran in one call")
}
