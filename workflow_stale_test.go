package taskorch_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A parent's completion under a lease that is no longer current is refused and releases
// nothing: its lease expired and was rescued (back to pending), so the old worker's completion
// is refused and the child still waits; the completion under the new lease releases it.
func TestWorkflowStaleCompletionDoesNotRelease(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	p := scalar[int64](t, pool, `select queues.enqueue('wf.stale', '{}')`)
	child := enqueueAfter(t, pool, "wf.stale.child", "cancel", p)
	got := claim(t, pool, "wf-stale", 1, "1 millisecond")
	require.Len(t, got, 1)
	require.Equal(t, p, got[0].TaskID)
	waitLeaseExpired(t, pool, p)
	mustExec(t, pool, `select queues.rescue_expired_leases()`)
	require.Equal(t, "pending", statusOf(t, pool, p))

	require.Empty(t, completeUnder(t, pool, []int64{p}, []int64{got[0].LeaseID}), "the stale completion was not refused")
	require.Equal(t, "waiting", statusOf(t, pool, child))
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.task_edge where child_id = $1`, child))

	require.Equal(t, map[int64]string{p: "completed"}, completeUnder(t, pool, []int64{p}, []int64{claimOne(t, pool, "wf.stale", p)}))
	require.Equal(t, "pending", statusOf(t, pool, child))
}

// A parent whose lease expires with no attempt left is made dead by rescue_expired_leases, and
// that statement cancels its waiting child.
func TestWorkflowRescuedDeadParentCancels(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	p := scalar[int64](t, pool, `select queues.enqueue('wf.rescue', '{}', _max_attempts => 1)`)
	child := enqueueAfter(t, pool, "wf.rescue.child", "cancel", p)
	require.Len(t, claim(t, pool, "wf-rescue", 1, "1 millisecond"), 1)
	waitLeaseExpired(t, pool, p)
	mustExec(t, pool, `select queues.rescue_expired_leases()`)
	require.Equal(t, "dead", statusOf(t, pool, p))
	require.Equal(t, "cancelled", statusOf(t, pool, child))
}
