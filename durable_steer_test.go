package taskorch_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

type steerArgs struct{}

func (steerArgs) TaskType() string { return "dwf.steer" }

// A workflow that failed for good, retried by hand, resumes from the failed step: the steps that
// completed are replayed, not run, and the failed one runs again.
func TestDurableWorkflowRetryByHandResumes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	var aRuns, bRuns atomic.Int32
	hs := taskorch.NewHandlers()
	taskorch.AddWorkflow(hs, func(ctx context.Context, wf *taskorch.Workflow, _ steerArgs) error {
		if _, err := taskorch.Step(wf, "a", func(context.Context) (int, error) { return int(aRuns.Add(1)), nil }); err != nil {
			return err
		}
		_, err := taskorch.Step(wf, "b", func(context.Context) (int, error) {
			if bRuns.Add(1) == 1 {
				return 0, taskorch.Discard(errors.New("the address is invalid"))
			}
			return 2, nil
		})
		return err
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})
	res, err := c.Enqueue(ctx, steerArgs{}, nil)
	require.NoError(t, err)
	waitStatus(t, pool, res.TaskID, taskorch.StatusFailed)

	_, err = c.Retry(ctx, res.TaskID)
	require.NoError(t, err)
	waitStatus(t, pool, res.TaskID, taskorch.StatusCompleted)
	require.Equal(t, int32(1), aRuns.Load(), "the completed step is replayed")
	require.Equal(t, int32(2), bRuns.Load(), "the failed step runs again")
	require.Equal(t, []string{"step:a", "step:b"}, scalar[[]string](t, pool,
		`select array_agg(kind || ':' || name order by seq) from queues.workflow_step where task_id = $1`, res.TaskID))
}

type cancelArgs struct{}

func (cancelArgs) TaskType() string { return "dwf.cancel" }

// Cancelling a running workflow stops its step: the step's context is cancelled (the worker is
// told at commit), nothing of the step is recorded, and the task stays cancelled.
func TestDurableWorkflowCancelStopsTheStep(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	inStep := make(chan struct{})
	stopped := make(chan error, 1)
	hs := taskorch.NewHandlers()
	taskorch.AddWorkflow(hs, func(ctx context.Context, wf *taskorch.Workflow, _ cancelArgs) error {
		_, err := taskorch.Step(wf, "long", func(ctx context.Context) (int, error) {
			close(inStep)
			<-ctx.Done()
			stopped <- context.Cause(ctx)
			return 0, ctx.Err()
		})
		return err
	}, &taskorch.HandlerOpts{Timeout: -1})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})
	res, err := c.Enqueue(ctx, cancelArgs{}, nil)
	require.NoError(t, err)
	<-inStep
	_, err = c.Cancel(ctx, res.TaskID)
	require.NoError(t, err)
	select {
	case cause := <-stopped:
		require.ErrorIs(t, cause, taskorch.ErrTaskCancelled)
	case <-time.After(20 * time.Second):
		t.Fatal("the step's context was not cancelled")
	}
	require.Equal(t, "cancelled", statusOf(t, pool, res.TaskID))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.workflow_step where task_id = $1`, res.TaskID))
}
