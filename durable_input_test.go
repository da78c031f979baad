package taskorch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

type inputArgs struct{}

func (inputArgs) TaskType() string { return "dwf.input" }

// The durable calls refuse bad input with ErrInvalidInput and record nothing: an empty or
// oversized name, a negative sleep or timeout, a version below 1, a step result that does not
// marshal. The run goes on: the refused calls took no position, but the step that ran and whose
// result was refused keeps its own (a replay runs it there again).
func TestDurableWorkflowCallsRefuseBadInput(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	errs := make(chan []error, 1)
	hs := taskorch.NewHandlers()
	taskorch.AddWorkflow(hs, func(ctx context.Context, wf *taskorch.Workflow, _ inputArgs) error {
		var got []error
		_, err := taskorch.Step(wf, "", func(context.Context) (int, error) { return 1, nil })
		got = append(got, err)
		_, err = taskorch.Step(wf, strings.Repeat("n", 201), func(context.Context) (int, error) { return 1, nil })
		got = append(got, err)
		got = append(got, wf.Sleep("nap", -time.Second))
		_, _, err = taskorch.AwaitSignal[map[string]any](wf, "s", "k", -time.Second)
		got = append(got, err)
		_, err = wf.Version("v", 0)
		got = append(got, err)
		_, err = taskorch.Step(wf, "chan", func(context.Context) (chan int, error) { return make(chan int), nil })
		got = append(got, err)
		errs <- got
		_, err = taskorch.Step(wf, "ok", func(context.Context) (int, error) { return 1, nil })
		return err
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})
	res, err := c.Enqueue(ctx, inputArgs{}, nil)
	require.NoError(t, err)
	waitStatus(t, pool, res.TaskID, taskorch.StatusCompleted)
	for i, e := range <-errs {
		require.ErrorIs(t, e, taskorch.ErrInvalidInput, "call %d", i)
	}
	// The "chan" step ran at position 1 and its result was refused before its checkpoint.
	require.Equal(t, []string{"2:ok"}, scalar[[]string](t, pool,
		`select array_agg(seq || ':' || name order by seq) from queues.workflow_step where task_id = $1`, res.TaskID))
}
