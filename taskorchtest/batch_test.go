package taskorchtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/taskorchtest"
)

// Work runs a batch handler's task as a batch of one: its error for the task is the outcome,
// and TaskFor.SetResult its result.
func TestWorkBatchHandler(t *testing.T) {
	t.Parallel()
	hs := taskorch.NewHandlers()
	taskorch.AddBatchHandler(hs, func(_ context.Context, tasks []*taskorch.TaskFor[charge]) []error {
		errs := make([]error, len(tasks))
		for i, task := range tasks {
			if task.Args.Do == "fail" {
				errs[i] = errDeclined
				continue
			}
			errs[i] = task.SetResult(receipt{Receipt: "batched", Attempt: len(tasks)})
		}
		return errs
	}, nil)
	cfg := &taskorch.WorkerConfig{Handlers: hs}

	res := taskorchtest.Work(t.Context(), t, cfg, charge{OrderID: 1}, nil)
	require.Equal(t, taskorchtest.OutcomeCompleted, res.Outcome)
	require.JSONEq(t, `{"receipt": "batched", "attempt": 1}`, string(res.Result))

	res = taskorchtest.Work(t.Context(), t, cfg, charge{OrderID: 2, Do: "fail"}, nil)
	require.Equal(t, taskorchtest.OutcomeFailed, res.Outcome)
	require.True(t, errors.Is(res.Err, errDeclined), "got %v", res.Err)
}
