package taskorch_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// Cancelling a whole workflow cancels every task of it that has not ended (a running one's
// outcome is then refused), leaves its ended tasks and every other task alone, records the
// reason in each event, and reports what it did; a second call finds nothing to do. Unknown ids
// and tasks in no workflow are not found; a bad id is refused.
func TestWorkflowCancelWhole(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	a := scalar[int64](t, pool, `select queues.enqueue('wfc.a', '{}')`)
	b := enqueueAfter(t, pool, "wfc.b", "cancel", a)
	cc := enqueueAfter(t, pool, "wfc.c", "cancel", a)
	d := enqueueAfter(t, pool, "wfc.d", "cancel", b, cc)
	e := enqueueAfter(t, pool, "wfc.e", "run", d)
	other := scalar[int64](t, pool, `select queues.enqueue('wfc.other', '{}')`)
	lone := scalar[int64](t, pool, `select queues.enqueue('wfc.lone', '{}')`)

	require.Equal(t, map[int64]string{a: "completed"}, completeUnder(t, pool, []int64{a}, []int64{claimOne(t, pool, "wfc.a", a)}))
	leaseB := claimOne(t, pool, "wfc.b", b)
	require.Equal(t, "running", statusOf(t, pool, b))
	require.Equal(t, "pending", statusOf(t, pool, cc))

	res, err := c.CancelWorkflow(ctx, a, "order withdrawn")
	require.NoError(t, err)
	require.Equal(t, &taskorch.WorkflowCancel{Cancelled: 4}, res)
	require.Equal(t, "completed", statusOf(t, pool, a))
	for _, id := range []int64{b, cc, d, e} {
		require.Equal(t, "cancelled", statusOf(t, pool, id))
		require.Equal(t, "order withdrawn", cancelReason(t, pool, id))
	}
	require.Equal(t, "pending", statusOf(t, pool, other))
	require.Equal(t, "pending", statusOf(t, pool, lone))
	// The running task's worker lost its lease: its completion is refused.
	require.NotEqual(t, "completed", completeUnder(t, pool, []int64{b}, []int64{leaseB})[b])
	require.Equal(t, "cancelled", statusOf(t, pool, b))

	res, err = c.CancelWorkflow(ctx, a, "")
	require.NoError(t, err)
	require.Equal(t, &taskorch.WorkflowCancel{}, res)

	// The default reason names the workflow.
	f := scalar[int64](t, pool, `select queues.enqueue('wfc.f', '{}')`)
	g := enqueueAfter(t, pool, "wfc.g", "cancel", f)
	res, err = c.CancelWorkflow(ctx, f, "")
	require.NoError(t, err)
	require.Equal(t, int64(2), res.Cancelled)
	require.Equal(t, fmt.Sprintf("workflow %d cancelled", f), cancelReason(t, pool, g))

	for _, id := range []int64{lone, 1 << 50, b} { // in no workflow; unknown; not a workflow's first task
		_, err = c.CancelWorkflow(ctx, id, "")
		require.ErrorIs(t, err, taskorch.ErrNotFound, "id %d", id)
	}
	_, err = c.CancelWorkflow(ctx, 0, "")
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	require.Equal(t, "pending", statusOf(t, pool, lone))
}

// A task of the workflow whose row another transaction holds is skipped, not waited for, and
// counted; calling again once it is free cancels it.
func TestWorkflowCancelWholeSkipsLockedRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, pool := newClient(t)
	a := scalar[int64](t, pool, `select queues.enqueue('wfl.a', '{}')`)
	b := enqueueAfter(t, pool, "wfl.b", "cancel", a)
	cc := enqueueAfter(t, pool, "wfl.c", "cancel", a)
	require.Equal(t, map[int64]string{a: "completed"}, completeUnder(t, pool, []int64{a}, []int64{claimOne(t, pool, "wfl.a", a)}))

	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `select from queues.task where task_id = $1 for no key update`, b)
	require.NoError(t, err)

	var matched, done, skipped int
	require.NoError(t, pool.QueryRow(ctx, `select * from queues.cancel_workflow($1, 'ann', 'stop')`, a).Scan(&matched, &done, &skipped))
	require.Equal(t, []int{2, 1, 1}, []int{matched, done, skipped})
	require.Equal(t, "cancelled", statusOf(t, pool, cc))
	require.NoError(t, holder.Rollback(ctx))
	require.Equal(t, "pending", statusOf(t, pool, b))
	require.NoError(t, pool.QueryRow(ctx, `select * from queues.cancel_workflow($1, 'ann', 'stop')`, a).Scan(&matched, &done, &skipped))
	require.Equal(t, []int{1, 1, 0}, []int{matched, done, skipped})
	require.Equal(t, "cancelled", statusOf(t, pool, b))
	require.Equal(t, "ann", scalar[string](t, pool, `select actor from queues.task_event where task_id = $1 and event = 'cancelled'`, cc))
}
