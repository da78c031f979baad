package taskorch_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// EnqueueMany's tasks may name different parents: each task waits for its own, under its own
// policy, the results come back in the order given, and an idempotency key repeated in a later
// group is a duplicate of the earlier task. In the caller's transaction a refused call leaves
// nothing of itself and the transaction usable.
func TestWorkflowEnqueueManyPerTaskParents(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	p := scalar[int64](t, pool, `select queues.enqueue('wfg.p', '{}')`)
	q := scalar[int64](t, pool, `select queues.enqueue('wfg.p', '{}')`)

	res, err := c.EnqueueMany(ctx, []taskorch.EnqueueParams{
		{Args: raw("wfg.c", `{"n":0}`), Opts: &taskorch.EnqueueOpts{After: []int64{p}, IdempotencyKey: "k0"}},
		{Args: raw("wfg.c", `{"n":1}`)},
		{Args: raw("wfg.c", `{"n":2}`), Opts: &taskorch.EnqueueOpts{After: []int64{q, p}}},
		{Args: raw("wfg.c", `{"n":3}`), Opts: &taskorch.EnqueueOpts{After: []int64{p}, OnParentFailure: taskorch.ParentFailureRun}},
		{Args: raw("wfg.c", `{"n":4}`), Opts: &taskorch.EnqueueOpts{After: []int64{p}, Priority: new(5)}},
		{Args: raw("wfg.c", `{"n":5}`), Opts: &taskorch.EnqueueOpts{After: []int64{p, q}, IdempotencyKey: "k0"}},
	})
	require.NoError(t, err)
	require.Len(t, res, 6)
	wantAfter := [][]int64{{p}, nil, {p, q}, {p}, {p}}
	wantPolicy := []string{"cancel", "", "cancel", "run", "cancel"}
	for i, r := range res[:5] {
		require.False(t, r.Duplicate, "task %d", i)
		var n int
		var after []int64
		var policy *string
		var status string
		require.NoError(t, pool.QueryRow(ctx, `select (payload->>'n')::int, after_ids, on_parent_failure, status::text
			from queues.task where task_id = $1`, r.TaskID).Scan(&n, &after, &policy, &status))
		require.Equal(t, i, n, "results come back in the order given")
		require.Equal(t, wantAfter[i], after, "task %d", i)
		if wantPolicy[i] == "" {
			require.Nil(t, policy)
			require.Equal(t, "pending", status)
		} else {
			require.Equal(t, wantPolicy[i], *policy, "task %d", i)
			require.Equal(t, "waiting", status)
		}
	}
	require.True(t, res[5].Duplicate, "a key repeated in a later group is the earlier task's")
	require.Equal(t, res[0].TaskID, res[5].TaskID)
	require.Equal(t, 5, scalar[int](t, pool, `select priority from queues.task where task_id = $1`, res[4].TaskID))

	// p fails: its cancel children are cancelled, the run child is released; q completes and
	// the child of both stays cancelled.
	require.Equal(t, "failed", scalar[string](t, pool, `select queues.fail_task($1, 'no', $2, false)::text`, p, claimOne(t, pool, "wfg.p", p)))
	require.Equal(t, "cancelled", statusOf(t, pool, res[0].TaskID))
	require.Equal(t, "cancelled", statusOf(t, pool, res[2].TaskID))
	require.Equal(t, "pending", statusOf(t, pool, res[3].TaskID))
	require.Equal(t, "cancelled", statusOf(t, pool, res[4].TaskID))

	// In the caller's transaction: a call refused in its second group leaves nothing of its first,
	// and the transaction goes on.
	before := scalar[int](t, pool, `select count(*) from queues.task`)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = c.EnqueueManyTx(ctx, tx, []taskorch.EnqueueParams{
		{Args: raw("wfg.d", `{}`), Opts: &taskorch.EnqueueOpts{After: []int64{q}}},
		{Args: raw("wfg.d", `{}`), Opts: &taskorch.EnqueueOpts{After: []int64{987654321}}},
	})
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	require.ErrorContains(t, err, "987654321")
	_, err = c.EnqueueTx(ctx, tx, raw("wfg.e", `{}`), nil)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, before+1, scalar[int](t, pool, `select count(*) from queues.task`))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task where task_type = 'wfg.d'`))
}
