package taskorch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// Tasks enqueued after one another form one workflow whose id is its first task's: a diamond's
// three later tasks carry the root's id (the root itself none), Client.Workflow returns the four
// nodes with their parents, and Client.Workflows counts them by status. A task after tasks of two
// workflows joins the older (smaller id). A task with neither parents nor children, a task that
// is not a workflow's first, and an unknown id are ErrNotFound.
func TestWorkflowIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	a := scalar[int64](t, pool, `select queues.enqueue('wf.a', '{}')`)
	b := enqueueAfter(t, pool, "wf.b", "cancel", a)
	cc := enqueueAfter(t, pool, "wf.c", "cancel", a)
	d := enqueueAfter(t, pool, "wf.d", "cancel", b, cc)
	alone := scalar[int64](t, pool, `select queues.enqueue('wf.alone', '{}')`)

	wf := func(id int64) *int64 {
		return scalar[*int64](t, pool, `select workflow_id from queues.task where task_id = $1`, id)
	}
	require.Nil(t, wf(a))
	require.Nil(t, wf(alone))
	for _, id := range []int64{b, cc, d} {
		require.Equal(t, a, *wf(id), "task %d", id)
	}

	w, err := c.Workflow(ctx, a)
	require.NoError(t, err)
	require.Equal(t, a, w.ID)
	require.Equal(t, []taskorch.WorkflowNode{
		{ID: a, Type: "wf.a", Status: taskorch.StatusPending},
		{ID: b, Type: "wf.b", Status: taskorch.StatusWaiting, Parents: []int64{a}},
		{ID: cc, Type: "wf.c", Status: taskorch.StatusWaiting, Parents: []int64{a}},
		{ID: d, Type: "wf.d", Status: taskorch.StatusWaiting, Parents: []int64{b, cc}},
	}, w.Nodes)

	// The claimed task carries its parents and workflow.
	got, err := c.Get(ctx, d)
	require.NoError(t, err)
	require.Equal(t, []int64{b, cc}, got.ParentIDs)
	require.Equal(t, a, *got.WorkflowID)

	// Two workflows: x → y, then z after d (workflow a) and y (workflow x): z joins a, the older.
	x := scalar[int64](t, pool, `select queues.enqueue('wf.x', '{}')`)
	y := enqueueAfter(t, pool, "wf.y", "run", x)
	z := enqueueAfter(t, pool, "wf.z", "run", y, d)
	require.Equal(t, x, *wf(y))
	require.Equal(t, a, *wf(z))
	w, err = c.Workflow(ctx, a)
	require.NoError(t, err)
	require.Len(t, w.Nodes, 5)
	require.Equal(t, []int64{d, y}, w.Nodes[4].Parents, "a parent from another workflow is an edge, not a node")
	// Each task that took a workflow's id is listed in queues.workflow_task, its root is not.
	require.Equal(t, []int64{b, cc, d, z}, scalar[[]int64](t, pool,
		`select array_agg(task_id order by task_id) from queues.workflow_task where workflow_id = $1`, a))
	require.Equal(t, []int64{y}, scalar[[]int64](t, pool,
		`select array_agg(task_id order by task_id) from queues.workflow_task where workflow_id = $1`, x))

	list, err := c.Workflows(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, []taskorch.WorkflowSummary{
		{ID: x, Tasks: 2, Counts: map[taskorch.Status]int{taskorch.StatusPending: 1, taskorch.StatusWaiting: 1}},
		{ID: a, Tasks: 5, Counts: map[taskorch.Status]int{taskorch.StatusPending: 1, taskorch.StatusWaiting: 4}},
	}, list)
	list, err = c.Workflows(ctx, 1)
	require.NoError(t, err)
	require.Len(t, list, 1)
	_, err = c.Workflows(ctx, 1001)
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)

	for _, id := range []int64{alone, b, 987654321, 0, -1} {
		_, err := c.Workflow(ctx, id)
		require.ErrorIs(t, err, taskorch.ErrNotFound, "workflow %d", id)
	}
}

// A task whose parent already ended when it is enqueued, and one cancelled at enqueue by a failed
// parent, still join the parent's workflow.
func TestWorkflowIDEndedParents(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	p := scalar[int64](t, pool, `select queues.enqueue('wf.p', '{}')`)
	ok := scalar[int64](t, pool, `select queues.enqueue('wf.ok', '{}')`)
	completeUnder(t, pool, []int64{ok}, []int64{claimOne(t, pool, "wf.ok", ok)})
	mustExec(t, pool, `select queues.cancel_task($1)`, p)
	cancelled := enqueueAfter(t, pool, "wf.k", "cancel", p)
	pending := enqueueAfter(t, pool, "wf.k", "cancel", ok)
	require.Equal(t, "cancelled", statusOf(t, pool, cancelled))
	require.Equal(t, "pending", statusOf(t, pool, pending))
	require.Equal(t, p, scalar[int64](t, pool, `select workflow_id from queues.task where task_id = $1`, cancelled))
	require.Equal(t, ok, scalar[int64](t, pool, `select workflow_id from queues.task where task_id = $1`, pending))
}
