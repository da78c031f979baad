package taskorch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// EnqueueMany with After: every task of the call waits for the same parents (named in any order,
// duplicates ignored), under the same policy, in one statement; a duplicate keeps its own
// parents; the batch is released by its parents' completion.
func TestWorkflowEnqueueManyAfter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	p1 := scalar[int64](t, pool, `select queues.enqueue('wf.p', '{}')`)
	p2 := scalar[int64](t, pool, `select queues.enqueue('wf.p', '{}')`)
	old, err := c.Enqueue(ctx, raw("wf.c", `{}`), &taskorch.EnqueueOpts{IdempotencyKey: "old"})
	require.NoError(t, err)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	res, err := c.EnqueueManyTx(ctx, tx, []taskorch.EnqueueParams{
		{Args: raw("wf.c", `{"n":1}`), Opts: &taskorch.EnqueueOpts{After: []int64{p1, p2}, OnParentFailure: taskorch.ParentFailureRun}},
		{Args: raw("wf.c", `{"n":2}`), Opts: &taskorch.EnqueueOpts{After: []int64{p2, p1, p2}, OnParentFailure: taskorch.ParentFailureRun}},
		{Args: raw("wf.c", `{"n":3}`), Opts: &taskorch.EnqueueOpts{After: []int64{p1, p2}, OnParentFailure: taskorch.ParentFailureRun, IdempotencyKey: "old"}},
	})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Len(t, res, 3)
	require.True(t, res[2].Duplicate)
	require.Equal(t, old.TaskID, res[2].TaskID)
	require.Equal(t, "pending", statusOf(t, pool, old.TaskID), "a duplicate keeps its own parents (none)")
	for _, r := range res[:2] {
		require.False(t, r.Duplicate)
		require.Equal(t, "waiting", statusOf(t, pool, r.TaskID))
		require.Equal(t, []int64{p1, p2}, scalar[[]int64](t, pool, `select after_ids from queues.task where task_id = $1`, r.TaskID))
		require.Equal(t, "run", scalar[string](t, pool, `select on_parent_failure from queues.task where task_id = $1`, r.TaskID))
	}
	mustExec(t, pool, `select queues.cancel_task($1)`, p1)
	completeUnder(t, pool, []int64{p2}, []int64{claimOne(t, pool, "wf.p", p2)})
	for _, r := range res[:2] {
		task, err := c.Get(ctx, r.TaskID)
		require.NoError(t, err)
		require.Equal(t, taskorch.StatusPending, task.Status)
	}
}

// EnqueueMany refuses, with ErrInvalidInput and nothing written: a parent that does not exist
// (the database's refusal), also when another group of the call was enqueued before it;
// OnParentFailure without After, or a policy that is not one.
func TestWorkflowEnqueueManyAfterBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	p := scalar[int64](t, pool, `select queues.enqueue('wf.p', '{}')`)
	q := scalar[int64](t, pool, `select queues.enqueue('wf.p', '{}')`)
	before := scalar[int](t, pool, `select count(*) from queues.task`)
	for name, tc := range map[string]struct {
		params []taskorch.EnqueueParams
		msg    string
	}{
		"missing parent": {[]taskorch.EnqueueParams{
			{Args: raw("wf.c", `{}`), Opts: &taskorch.EnqueueOpts{After: []int64{p, 987654321}}},
			{Args: raw("wf.c", `{}`), Opts: &taskorch.EnqueueOpts{After: []int64{987654321, p}}},
		}, "987654321"},
		"missing parent in a later group": {[]taskorch.EnqueueParams{
			{Args: raw("wf.c", `{}`), Opts: &taskorch.EnqueueOpts{After: []int64{p}}},
			{Args: raw("wf.c", `{}`)},
			{Args: raw("wf.c", `{}`), Opts: &taskorch.EnqueueOpts{After: []int64{q, 987654321}}},
		}, "987654321"},
		"policy without parents": {[]taskorch.EnqueueParams{
			{Args: raw("wf.c", `{}`), Opts: &taskorch.EnqueueOpts{OnParentFailure: taskorch.ParentFailureRun}},
		}, "OnParentFailure needs After"},
		"bad policy": {[]taskorch.EnqueueParams{
			{Args: raw("wf.c", `{}`), Opts: &taskorch.EnqueueOpts{After: []int64{p}, OnParentFailure: "maybe"}},
		}, "OnParentFailure must be"},
	} {
		_, err := c.EnqueueMany(ctx, tc.params)
		require.ErrorIs(t, err, taskorch.ErrInvalidInput, name)
		require.ErrorContains(t, err, tc.msg, name)
	}
	require.Equal(t, before, scalar[int](t, pool, `select count(*) from queues.task`))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_edge`))
}
