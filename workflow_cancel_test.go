package taskorch_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// A parent that fails for good cancels, in the statement that fails it, its waiting children
// under the default policy ('cancel') and theirs in turn, three levels down, each with an event
// naming its own parent; a grandchild with policy 'run' counts its cancelled parent as ended and
// becomes pending. Cancelling a waiting task by hand cascades the same way, and the parents it
// waited for still complete without touching it.
func TestWorkflowCancelCascade(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	a := scalar[int64](t, pool, `select queues.enqueue('wf.a', '{}')`)
	b := enqueueAfter(t, pool, "wf.b", "cancel", a)
	c := enqueueAfter(t, pool, "wf.c", "cancel", b)
	d := enqueueAfter(t, pool, "wf.d", "cancel", c)
	r := enqueueAfter(t, pool, "wf.r", "run", b)
	x := scalar[int64](t, pool, `select queues.enqueue('wf.x', '{}')`)
	j := enqueueAfter(t, pool, "wf.j", "cancel", b, x)
	for _, id := range []int64{b, c, d, r, j} {
		require.Equal(t, "waiting", statusOf(t, pool, id))
	}

	lease := claimOne(t, pool, "wf.a", a)
	require.Equal(t, "failed", scalar[string](t, pool, `select queues.fail_task($1, 'broken', $2, false)::text`, a, lease))
	require.Equal(t, "cancelled", statusOf(t, pool, b))
	require.Equal(t, "cancelled", statusOf(t, pool, c))
	require.Equal(t, "cancelled", statusOf(t, pool, d))
	require.Equal(t, "pending", statusOf(t, pool, r))
	require.Equal(t, fmt.Sprintf("parent task %d ended failed", a), cancelReason(t, pool, b))
	require.Equal(t, fmt.Sprintf("parent task %d ended cancelled", b), cancelReason(t, pool, c))
	require.Equal(t, fmt.Sprintf("parent task %d ended cancelled", c), cancelReason(t, pool, d))
	require.Equal(t, "cancelled", statusOf(t, pool, j))
	require.Equal(t, fmt.Sprintf("parent task %d ended cancelled", b), cancelReason(t, pool, j))
	// A child of one parent has no counter but its edge, gone with its parent's end. A cancelled
	// child of two keeps its counter and its other parent's edge until it is deleted; the
	// released one's are gone.
	require.Equal(t, []int64{x}, scalar[[]int64](t, pool, `select array_agg(parent_id) from queues.task_edge`))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_wait_stripe where child_id = $1`, r))
	require.Equal(t, []int64{j}, scalar[[]int64](t, pool, `select array_agg(child_id order by child_id) from queues.task_wait_stripe`))
	require.Len(t, scalar[[]int64](t, pool, `select array_agg(task_id) from queues.delete_tasks(array[$1, $2, $3, $4]::bigint[]) where outcome = 'done'`, b, c, d, j), 4)
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_wait_stripe`))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_edge`))

	// By hand: cancelling a waiting middle task cancels what waits for it; its parent is untouched.
	p := scalar[int64](t, pool, `select queues.enqueue('wf.p', '{}')`)
	m := enqueueAfter(t, pool, "wf.m", "cancel", p)
	n := enqueueAfter(t, pool, "wf.n", "cancel", m)
	require.Equal(t, "cancelled", scalar[string](t, pool, `select queues.cancel_task($1, 'not needed')::text`, m))
	require.Equal(t, "cancelled", statusOf(t, pool, n))
	require.Equal(t, fmt.Sprintf("parent task %d ended cancelled", m), cancelReason(t, pool, n))
	require.Equal(t, "pending", statusOf(t, pool, p))
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.task_edge where child_id = $1`, m), "the edge stays until its parent ends")
	require.Equal(t, map[int64]string{p: "completed"}, completeUnder(t, pool, []int64{p}, []int64{claimOne(t, pool, "wf.p", p)}))
	require.Equal(t, "cancelled", statusOf(t, pool, m))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_edge`))
}

// A cancellation cascades down a chain of 300 waiting tasks in the one statement that fails its
// root: a loop, not a recursion, so the depth costs no stack.
func TestWorkflowCancelCascadeDeep(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	root := scalar[int64](t, pool, `select queues.enqueue('wf.root', '{}')`)
	mustExec(t, pool, `do $$ declare _id bigint := (select max(task_id) from queues.task); begin
			for _i in 1..300 loop _id := queues.enqueue('wf.link', '{}', _after => array[_id]); end loop;
		end $$`)
	last := scalar[int64](t, pool, `select max(task_id) from queues.task`)
	require.Equal(t, 300, scalar[int](t, pool, `select count(*) from queues.task where status = 'waiting'`))
	require.Equal(t, "failed", scalar[string](t, pool, `select queues.fail_task($1, 'no', $2, false)::text`, root, claimOne(t, pool, "wf.root", root)))
	require.Equal(t, 300, scalar[int](t, pool, `select count(*) from queues.task where status = 'cancelled'`))
	require.Equal(t, fmt.Sprintf("parent task %d ended cancelled", last-1), cancelReason(t, pool, last))
}
