package taskorch_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// Bad _after input is refused with 22023 naming what is wrong, and nothing is written: a parent
// that does not exist, a NULL parent, a policy other than cancel or run. Duplicate parents
// collapse into one (one edge, released once). A task cannot name itself or a later task: its
// id does not exist when it names its parents, so the graph has no cycles.
func TestWorkflowBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	p := scalar[int64](t, pool, `select queues.enqueue('wf.in', '{}')`)
	before := scalar[int](t, pool, `select count(*) from queues.task`)
	for sql, want := range map[string]string{
		`select queues.enqueue('wf.c', '{}', _after => array[$1::bigint, 987654321])`:                      "_after names task 987654321, which does not exist",
		`select queues.enqueue_with_result('wf.c', '{}', _after => array[$1::bigint, 987654321])`:          "_after names task 987654321, which does not exist",
		`select queues.enqueue('wf.c', '{}', _after => array[$1::bigint, null])`:                           "_after must not contain NULL",
		`select queues.enqueue('wf.c', '{}', _after => array[$1::bigint], _on_parent_failure => 'banana')`: "_on_parent_failure must be 'cancel' or 'run', not 'banana'",
		`select queues.enqueue('wf.c', '{}', _after => array[$1::bigint], _on_parent_failure => null)`:     "_on_parent_failure must be 'cancel' or 'run', not NULL",
		`select queues.enqueue('wf.c', '{}', _after => array[$1::bigint + 1000])`:                          "which does not exist",
	} {
		_, err := pool.Exec(ctx, sql, p)
		var pe *pgconn.PgError
		require.True(t, errors.As(err, &pe), "%s: %v", sql, err)
		require.Equal(t, "22023", pe.Code, sql)
		require.Contains(t, pe.Message, want, sql)
	}
	require.Equal(t, before, scalar[int](t, pool, `select count(*) from queues.task`))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_edge`))

	// Go: the same refusals are ErrInvalidInput, checked before or by the database.
	_, err := c.Enqueue(ctx, raw("wf.c", `{}`), &taskorch.EnqueueOpts{After: []int64{987654321}})
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	require.ErrorContains(t, err, "987654321")
	_, err = c.Enqueue(ctx, raw("wf.c", `{}`), &taskorch.EnqueueOpts{After: []int64{p}, OnParentFailure: "banana"})
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	_, err = c.Enqueue(ctx, raw("wf.c", `{}`), &taskorch.EnqueueOpts{OnParentFailure: taskorch.ParentFailureRun})
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	_, err = c.Enqueue(ctx, raw("wf.c", `{}`), &taskorch.EnqueueOpts{After: []int64{p}, DebounceKey: "k", Debounce: 1})
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	_, err = c.EnqueueMany(ctx, []taskorch.EnqueueParams{{Args: raw("wf.c", `{}`), Opts: &taskorch.EnqueueOpts{After: []int64{p}}}, {Args: raw("wf.c", `{}`), Opts: &taskorch.EnqueueOpts{After: []int64{p, 987654321}}}})
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	require.Equal(t, before, scalar[int](t, pool, `select count(*) from queues.task`))

	// Duplicates collapse; an empty _after is no parents.
	dup := enqueueAfter(t, pool, "wf.c", "cancel", p, p, p)
	require.Equal(t, []int64{p}, scalar[[]int64](t, pool, `select after_ids from queues.task where task_id = $1`, dup))
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.task_edge where child_id = $1`, dup))
	none := scalar[int64](t, pool, `select queues.enqueue('wf.c', '{}', _after => '{}')`)
	require.Equal(t, "pending", statusOf(t, pool, none))
	completeUnder(t, pool, []int64{p}, []int64{claimOne(t, pool, "wf.in", p)})
	require.Equal(t, "pending", statusOf(t, pool, dup))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_wait_stripe`))

	// Go: After and OnParentFailure reach the database.
	q := scalar[int64](t, pool, `select queues.enqueue('wf.in', '{}')`)
	r, err := c.Enqueue(ctx, raw("wf.c", `{}`), &taskorch.EnqueueOpts{After: []int64{q}, OnParentFailure: taskorch.ParentFailureRun})
	require.NoError(t, err)
	require.Equal(t, "waiting", statusOf(t, pool, r.TaskID))
	require.Equal(t, "run", scalar[string](t, pool, `select on_parent_failure from queues.task where task_id = $1`, r.TaskID))
	row, err := c.Get(ctx, r.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusWaiting, row.Status)
}
