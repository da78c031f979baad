package taskorch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// A claimed row the worker cannot read fails on its own and takes none of its claim with it.
// The table refuses infinite times (task_times_finite), so the row is written as an older
// version or a hand-written UPDATE could have: past the constraint. It is claimed first (a
// -infinity run time sorts first), in one claim with healthy tasks; those run normally, and it is
// failed without retry with a message that says what could not be read.
func TestUnreadableClaimedTaskFailsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	var healthy []int64
	for range 5 {
		res, err := c.Enqueue(ctx, raw("healthy", `{}`), nil)
		require.NoError(t, err)
		healthy = append(healthy, res.TaskID)
	}
	mustExec(t, pool, `alter table queues.task drop constraint task_times_finite`)
	poison := scalar[int64](t, pool, `insert into queues.task (task_type, payload, scheduled_at, run_at)
		values ('healthy', '{}', '-infinity', '-infinity') returning task_id`)
	res, err := c.Enqueue(ctx, raw("healthy", `{}`), nil)
	require.NoError(t, err)
	healthy = append(healthy, res.TaskID)

	ran := make(chan int64, 10)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("healthy", func(_ context.Context, task *taskorch.Task) error {
		ran <- task.ID
		return nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Concurrency: 10})

	waitStatus(t, pool, poison, taskorch.StatusFailed)
	require.Contains(t, lastError(t, pool, poison), "the worker could not read the claimed task: the task's scheduled_at is -infinity")
	require.Equal(t, 1, scalar[int](t, pool, `select attempt from queues.task where task_id = $1`, poison), "failed for good, not retried")
	for _, id := range healthy {
		waitStatus(t, pool, id, taskorch.StatusCompleted)
		require.Equal(t, int64(1), scalar[int64](t, pool, `select count(*) from queues.task_lease where task_id = $1`, id),
			"claimed once: its claim mate did not take it down")
	}
	require.Equal(t, int64(1), scalar[int64](t, pool, `select count(*) from queues.task_lease where task_id = $1`, poison))
}
