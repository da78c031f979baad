package taskorchtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/taskorchtest"
)

// chargeCard is a handler function as a program writes it, tested on its own.
func chargeCard(ctx context.Context, t *taskorch.TaskFor[charge]) error {
	return taskorch.SetResult(ctx, receipt{Receipt: "r-9", Attempt: t.Attempt})
}

// A handler that calls SetResult can be unit-tested outside a worker under HandlerContext; outside
// one, SetResult refuses.
func TestHandlerContext(t *testing.T) {
	t.Parallel()
	task := &taskorch.TaskFor[charge]{Task: &taskorch.Task{Type: "charge", Attempt: 2}, Args: charge{OrderID: 9}}
	require.ErrorIs(t, chargeCard(t.Context(), task), taskorch.ErrInvalidInput, "outside a worker")

	ctx, res := taskorchtest.HandlerContext(t.Context(), 0)
	require.Nil(t, res.Value())
	require.ErrorContains(t, res.Decode(&receipt{}), "the handler set no result")
	require.NoError(t, chargeCard(ctx, task))
	require.JSONEq(t, `{"receipt": "r-9", "attempt": 2}`, string(res.Value()))
	var r receipt
	require.NoError(t, res.Decode(&r))
	require.Equal(t, receipt{Receipt: "r-9", Attempt: 2}, r)
	require.Empty(t, res.Over())

	// A result over the bound is refused, as a worker refuses it, and the last one stays.
	require.ErrorIs(t, taskorch.SetResult(ctx, strings.Repeat("x", 2<<20)), taskorch.ErrInvalidInput)
	require.Contains(t, res.Over(), "over the worker's limit of 1048576 bytes")
	require.JSONEq(t, `{"receipt": "r-9", "attempt": 2}`, string(res.Value()))

	ctx, res = taskorchtest.HandlerContext(t.Context(), 4)
	require.ErrorIs(t, taskorch.SetResult(ctx, "too long"), taskorch.ErrInvalidInput)
	require.Contains(t, res.Over(), "over the worker's limit of 4 bytes")
	require.NoError(t, taskorch.SetResult(ctx, nil))
	require.Nil(t, res.Value())
}
