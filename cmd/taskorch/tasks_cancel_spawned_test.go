package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// `taskorch tasks cancel ID` of a durable workflow cancels the tasks it spawned that have not
// ended (one pending, one not due yet; one completed stays), each with an event naming the
// workflow, and says how many; a second run is a no-op for both.
func TestTasksCancelReachesSpawnedTasks(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	wf := enqueue(t, pool, "signup", `{}`, 0)
	lease := q[int64](t, pool, `select lease_id from queues.claim_tasks_by_id('w', array[$1::bigint], interval '5 minutes', array['signup'])`, wf)
	spawn := func(seq int, scheduled string) int64 {
		return q[int64](t, pool, `select spawned_task_id from queues.spawn_workflow_task($1, $2, $3, $4, 'welcome', '{}', now() + $5::interval)`,
			wf, lease, seq, fmt.Sprintf("child-%d", seq), scheduled)
	}
	now, later, done := spawn(1, "0s"), spawn(2, "1 day"), spawn(3, "0s")
	doneLease := q[int64](t, pool, `select lease_id from queues.claim_tasks_by_id('w', array[$1::bigint], interval '5 minutes', array['welcome'])`, done)
	q[int](t, pool, `select count(*)::int from queues.complete_tasks_with_results(array[$1::bigint], array[$2::bigint], null)`, done, doneLease)
	env := []string{"DATABASE_URL=" + url}

	r := runBinary(t, env, "tasks", "cancel", fmt.Sprint(wf))
	require.Equal(t, 0, r.code, r.err)
	require.Contains(t, r.out, fmt.Sprintf("task %d is cancelled\ntask %d: 2 task(s) it spawned cancelled\n", wf, wf))
	for _, id := range []int64{now, later} {
		require.Equal(t, "cancelled", q[string](t, pool, `select status::text from queues.task where task_id = $1`, id))
		require.Equal(t, fmt.Sprintf("spawned by workflow task %d, cancelled", wf),
			q[string](t, pool, `select detail from queues.task_event where task_id = $1 and event = 'cancelled'`, id))
	}
	require.Equal(t, "completed", q[string](t, pool, `select status::text from queues.task where task_id = $1`, done))

	r = runBinary(t, env, "tasks", "cancel", fmt.Sprint(wf))
	require.Equal(t, 0, r.code, r.err)
	require.NotContains(t, r.out, "spawned")
}
