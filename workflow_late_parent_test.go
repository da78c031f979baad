package taskorch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A child named in a transaction that is still open while its running parent's completion
// commits: the completion cannot see the uncommitted edge, so the enqueuer's commit counts the
// parent (the deferred check) and the child is pending. In the other order (the enqueue commits
// first), the completion counts it. Either way it is counted once: the child is released, its
// edge and counters are gone, and nothing blocks the completion on the open transaction.
func TestWorkflowLateNamedParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := newClient(t)
	for _, completeFirst := range []bool{true, false} {
		p := scalar[int64](t, pool, `select queues.enqueue('wf.late', '{}')`)
		lease := claimOne(t, pool, "wf.late", p)
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		child := enqueueAfter(t, tx, "wf.late.child", "cancel", p)
		require.Equal(t, "waiting", statusOf(t, tx, child))
		if completeFirst {
			require.Equal(t, map[int64]string{p: "completed"}, completeUnder(t, pool, []int64{p}, []int64{lease}))
			require.NoError(t, tx.Commit(ctx))
		} else {
			require.NoError(t, tx.Commit(ctx))
			require.Equal(t, "waiting", statusOf(t, pool, child))
			require.Equal(t, map[int64]string{p: "completed"}, completeUnder(t, pool, []int64{p}, []int64{lease}))
		}
		require.Equal(t, "pending", statusOf(t, pool, child), "completeFirst=%v", completeFirst)
		require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_edge where child_id = $1`, child))
		require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_wait_stripe where child_id = $1`, child))
	}
}
