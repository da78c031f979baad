package taskorch_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Under 'run' a child becomes due once every parent has ended, whatever the outcome: one parent
// dead (attempts exhausted), one cancelled, the last completed. Under 'cancel' a sibling with the
// same parents is cancelled by the first failure.
func TestWorkflowRunPolicy(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	p1 := scalar[int64](t, pool, `select queues.enqueue('wf.p', '{}', _max_attempts => 1)`)
	p2 := scalar[int64](t, pool, `select queues.enqueue('wf.p', '{}')`)
	p3 := scalar[int64](t, pool, `select queues.enqueue('wf.p', '{}')`)
	run := enqueueAfter(t, pool, "wf.run", "run", p1, p2, p3)
	cancel := enqueueAfter(t, pool, "wf.cancel", "cancel", p1, p2, p3)

	lease := claimOne(t, pool, "wf.p", p1)
	require.Equal(t, "dead", scalar[string](t, pool, `select queues.fail_task($1, 'out of attempts', $2)::text`, p1, lease))
	require.Equal(t, "waiting", statusOf(t, pool, run))
	require.Equal(t, "cancelled", statusOf(t, pool, cancel))

	require.Equal(t, "cancelled", scalar[string](t, pool, `select queues.cancel_task($1)::text`, p2))
	require.Equal(t, "waiting", statusOf(t, pool, run))

	completeUnder(t, pool, []int64{p3}, []int64{claimOne(t, pool, "wf.p", p3)})
	require.Equal(t, "pending", statusOf(t, pool, run))
	require.Equal(t, 0, scalar[int](t, pool, `select attempt from queues.task where task_id = $1`, run))
	require.Equal(t, map[int64]string{run: "completed"}, completeUnder(t, pool, []int64{run}, []int64{claimOne(t, pool, "wf.run", run)}))
}
