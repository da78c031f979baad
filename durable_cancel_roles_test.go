package taskorch_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// queues.cancel_spawned_tasks, an operator's function, called as the roles that may not call it
// and with what a careless caller sends: the application role (granted enqueueing) and the worker
// role are refused; a NULL, zero or negative id and an actor with control characters are refused
// with 22023, an unknown id with P0002, and nothing is written; a task that spawned nothing gives
// 0, 0, 0.
func TestCancelSpawnedTasksAsRolesAndBadInput(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	app := "app_" + randomHex(t, 6)
	mustExec(t, pool, "create role "+pgx.Identifier{app}.Sanitize()+" nologin")
	t.Cleanup(func() {
		mustExec(t, pool, "drop owned by "+pgx.Identifier{app}.Sanitize()+"; drop role "+pgx.Identifier{app}.Sanitize())
	})
	mustExec(t, pool, `select queues.grant_enqueue($1)`, app)

	wf := scalar[int64](t, pool, `select queues.enqueue('dwf.roles', '{}')`)
	lease := claimOne(t, pool, "dwf.roles", wf)
	child := scalar[int64](t, pool, `select spawned_task_id from queues.spawn_workflow_task($1, $2, 1, 'child', 'dwf.roles_child', '{}')`, wf, lease)
	mustExec(t, pool, `select queues.cancel_task($1)`, wf)
	snapshot := func() string {
		return scalar[string](t, pool, `select concat_ws('|',
			(select string_agg(row(t.task_id, t.status, t.lease_id, t.cancelled_at)::text, ',' order by t.task_id) from queues.task t),
			(select count(*) from queues.task_event))`)
	}
	before := snapshot()

	for _, role := range []string{app, "worker_service_user"} {
		err := probeAs(t, pool, role, `select * from queues.cancel_spawned_tasks($1)`, wf)
		require.ErrorContains(t, err, "permission denied", role)
	}
	for _, c := range []struct{ sql, code, re string }{
		{`select * from queues.cancel_spawned_tasks(null)`, "22023", `_task_id must be a task's id, got NULL`},
		{`select * from queues.cancel_spawned_tasks(0)`, "22023", `_task_id must be a task's id, got 0`},
		{`select * from queues.cancel_spawned_tasks(-1)`, "22023", `_task_id must be a task's id, got -1`},
		{`select * from queues.cancel_spawned_tasks(9223372036854775807)`, "P0002", `task 9223372036854775807 does not exist`},
		{`select * from queues.cancel_spawned_tasks(1, e'ops\nx')`, "22023", `_actor must be at most 200 characters without control characters`},
		{`select * from queues.cancel_spawned_tasks(1, repeat('a', 201))`, "22023", `_actor must be at most 200 characters`},
	} {
		requireSQLState(t, probeAs(t, pool, "", c.sql), c.code, c.re, c.sql)
	}
	require.Equal(t, before, snapshot(), "nothing written")

	require.Equal(t, "0,0,0", scalar[string](t, pool, `select concat_ws(',', matched, done, skipped) from queues.cancel_spawned_tasks($1)`, child),
		"a task that spawned nothing")
	require.Equal(t, "1,1,0", scalar[string](t, pool, `select concat_ws(',', matched, done, skipped) from queues.cancel_spawned_tasks($1, 'ops', 'withdrawn')`, wf))
	require.Equal(t, "cancelled", statusOf(t, pool, child))
	require.Equal(t, "withdrawn", cancelReason(t, pool, child))
	require.Equal(t, "0,0,0", scalar[string](t, pool, `select concat_ws(',', matched, done, skipped) from queues.cancel_spawned_tasks($1)`, wf),
		"again: nothing left to cancel")
}
