package taskorch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// A task of a running batch that is cancelled loses its lease: the worker stops that task's run
// (its own context is cancelled, as a middleware sees), the batch's context is not cancelled, and
// when the handler returns nil for every task the cancelled task's completion is refused by its
// lease's fence while the others complete.
func TestBatchHandlerLeaseLostMidBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	ids := enqueueItems(t, c, 3, nil, nil)
	victim := ids[1]

	started := make(chan []int64, 1)
	release := make(chan struct{})
	batchCtxErr := make(chan error, 1)
	var once sync.Once
	handler := func(ctx context.Context, tasks []*taskorch.TaskFor[batchItem]) []error {
		once.Do(func() {
			got := make([]int64, len(tasks))
			for i, task := range tasks {
				got[i] = task.ID
			}
			started <- got
			<-release
			batchCtxErr <- ctx.Err()
		})
		return make([]error, len(tasks))
	}
	// The middleware runs around each task of the batch, with the task's own context: it tells
	// when the worker stopped the victim's run.
	stopped := make(chan error, 1)
	watch := func(next taskorch.Handler) taskorch.Handler {
		return taskorch.HandlerFunc(func(ctx context.Context, task *taskorch.Task) error {
			if task.ID == victim {
				stop := context.AfterFunc(ctx, func() { stopped <- context.Cause(ctx) })
				defer stop()
			}
			return next.Work(ctx, task)
		})
	}
	startBatchWorker(t, pool, handler, nil, &taskorch.WorkerConfig{Middleware: []taskorch.Middleware{watch}})

	select {
	case got := <-started:
		require.Equal(t, ids, got, "enqueued before the worker started, the three tasks are one batch")
	case <-time.After(30 * time.Second):
		t.Fatal("the batch did not start")
	}
	_, err := c.Cancel(ctx, victim)
	require.NoError(t, err)
	select {
	case cause := <-stopped:
		require.ErrorIs(t, cause, taskorch.ErrTaskCancelled)
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop the cancelled task's run")
	}
	close(release)
	require.NoError(t, <-batchCtxErr, "one task's cancellation does not cancel the batch's context")

	for _, id := range []int64{ids[0], ids[2]} {
		waitStatus(t, pool, id, taskorch.StatusCompleted)
		require.Equal(t, []string{"claimed:running", "completed:completed"}, eventsOf(t, c, id))
	}
	require.Eventually(t, func() bool {
		return scalar[int64](t, pool, `select count(*) from queues.error where task_id = $1 and error_message like 'completion refused%'`, victim) == 1
	}, 20*time.Second, 5*time.Millisecond, "the cancelled task's completion is refused by its fence")
	task, err := c.Get(ctx, victim)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusCancelled, task.Status)
	require.Nil(t, task.CompletedAt)
	require.Equal(t, []string{"claimed:running", "cancelled:cancelled"}, eventsOf(t, c, victim))
}
