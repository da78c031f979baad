package taskorch_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A waiting task is claimed by none of the claims (claim_tasks, claim_tasks_by_id, which a
// transport's delivery uses) nor dispatched to a transport, spends no attempt, and holds no
// slot of its type's limit; once released it is claimed like any task.
func TestWorkflowWaitingNeverClaimed(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	mustExec(t, pool, `select queues.set_limit('wf.w', 1)`)
	p := scalar[int64](t, pool, `select queues.enqueue('wf.p', '{}')`)
	w := enqueueAfter(t, pool, "wf.w", "cancel", p)
	require.Empty(t, scalar[[]int64](t, pool, `select coalesce(array_agg(d), '{}') from queues.dispatch_tasks('redis', 100, 1, array['wf.w']) d`))
	require.Empty(t, scalar[[]int64](t, pool, `select coalesce(array_agg(task_id), '{}') from queues.claim_tasks_by_id('x', array[$1::bigint])`, w))
	require.Empty(t, scalar[[]int64](t, pool, `select coalesce(array_agg(task_id), '{}') from queues.claim_tasks('x', 10, interval '1 minute', array['wf.w'])`))
	// The limit's one slot is free: another task of the type runs while w waits.
	other := scalar[int64](t, pool, `select queues.enqueue('wf.w', '{}')`)
	got := claim(t, pool, "x", 10, "1 minute")
	ids := []int64{}
	for _, g := range got {
		ids = append(ids, g.TaskID)
	}
	require.ElementsMatch(t, []int64{p, other}, ids)
	require.Equal(t, "waiting", statusOf(t, pool, w))
	require.Zero(t, scalar[int](t, pool, `select attempt from queues.task where task_id = $1`, w))
}
