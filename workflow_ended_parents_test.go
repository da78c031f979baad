package taskorch_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// Parents that ended before the child names them count at once: completed ones as done;
// failed, dead and cancelled ones cancel the child under 'cancel' (with an event naming the
// parent) and count as ended under 'run'. A child whose parents all ended is pending at once;
// one that also names a parent still pending waits for it.
func TestWorkflowParentsAlreadyEnded(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	ended := map[string]int64{}
	for _, outcome := range []string{"completed", "failed", "dead", "cancelled"} {
		id := scalar[int64](t, pool, `select queues.enqueue('wf.ended', '{}', _max_attempts => 1)`)
		switch outcome {
		case "cancelled":
			mustExec(t, pool, `select queues.cancel_task($1)`, id)
		default:
			lease := claimOne(t, pool, "wf.ended", id)
			switch outcome {
			case "completed":
				completeUnder(t, pool, []int64{id}, []int64{lease})
			case "failed":
				mustExec(t, pool, `select queues.fail_task($1, 'no', $2, false)`, id, lease)
			case "dead":
				mustExec(t, pool, `select queues.fail_task($1, 'no', $2, true)`, id, lease)
			}
		}
		require.Equal(t, outcome, statusOf(t, pool, id))
		ended[outcome] = id
	}
	open := scalar[int64](t, pool, `select queues.enqueue('wf.open', '{}')`)

	require.Equal(t, "pending", statusOf(t, pool, enqueueAfter(t, pool, "wf.child", "cancel", ended["completed"])))
	for _, outcome := range []string{"failed", "dead", "cancelled"} {
		c := enqueueAfter(t, pool, "wf.child", "cancel", ended["completed"], ended[outcome])
		require.Equal(t, "cancelled", statusOf(t, pool, c), outcome)
		require.Equal(t, fmt.Sprintf("parent task %d ended %s", ended[outcome], outcome), cancelReason(t, pool, c))
		require.Equal(t, "pending", statusOf(t, pool, enqueueAfter(t, pool, "wf.child", "run", ended["completed"], ended[outcome])), outcome)
	}
	all := []int64{ended["completed"], ended["failed"], ended["dead"], ended["cancelled"], open}
	w := enqueueAfter(t, pool, "wf.child", "run", all...)
	require.Equal(t, "waiting", statusOf(t, pool, w))
	require.Equal(t, all, scalar[[]int64](t, pool, `select after_ids from queues.task where task_id = $1`, w))
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.task_edge where child_id = $1`, w))
	completeUnder(t, pool, []int64{open}, []int64{claimOne(t, pool, "wf.open", open)})
	require.Equal(t, "pending", statusOf(t, pool, w))
}
