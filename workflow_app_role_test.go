package taskorch_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// An application role granted enqueueing (queues.grant_enqueue) names parents through
// queues.enqueue's _after, and that is all: it cannot read or write the edges, counters or a workflow's
// tasks, call the functions that count a parent's end, or release or cancel a child by any other way
// (docs/workflows.md, "What naming a parent reveals and allows"); neither can the worker role.
// Naming a parent changes nothing on it.
func TestWorkflowAppRoleNamesParentsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := newClient(t)
	app := "app_" + randomHex(t, 6)
	mustExec(t, pool, "create role "+pgx.Identifier{app}.Sanitize()+" nologin")
	t.Cleanup(func() {
		mustExec(t, pool, "drop owned by "+pgx.Identifier{app}.Sanitize()+"; drop role "+pgx.Identifier{app}.Sanitize())
	})
	mustExec(t, pool, `select queues.grant_enqueue($1)`, app)
	for _, fn := range []string{"internal.resolve_parents(bigint[], queues.task_status[])", "internal.attach_parents(bigint, bigint[], text)",
		"internal.check_edge_parent()", "internal.note_ended_parent()", "internal.resolve_ended_parents()", "internal.forget_parents()",
		"internal.parents_of(bigint[], text)",
		"internal.attach_children(bigint[], bigint[], bigint, queues.task_status, integer, bigint, queues.task_status)"} {
		require.False(t, scalar[bool](t, pool, `select has_function_privilege($1, $2, 'execute')`, app, fn), fn)
		require.False(t, scalar[bool](t, pool, `select has_function_privilege('worker_service_user', $1, 'execute')`, fn), fn)
	}

	parent := scalar[int64](t, pool, `select queues.enqueue('wf.other', '{"secret": 1}')`)
	before := scalar[string](t, pool, `select row(t.*)::text from queues.task t where task_id = $1`, parent)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "set local role "+pgx.Identifier{app}.Sanitize())
	require.NoError(t, err)
	child := scalar[int64](t, tx, `select queues.enqueue('wf.mine', '{}', _after => array[$1::bigint])`, parent)
	for _, sql := range []string{
		`select * from queues.task_edge`,
		`delete from queues.task_edge`,
		`update queues.task_wait_stripe set pending = 0`,
		`insert into queues.task_edge values (1, 2, 0)`,
		`update queues.task set status = 'pending' where status = 'waiting'`,
		`select internal.resolve_parents(array[1::bigint], array['completed'::queues.task_status])`,
		`select * from queues.workflow_task`,
		`insert into queues.workflow_task values (1, 2)`,
		`delete from queues.workflow_task`,
		`select internal.parents_of(array[1::bigint], 'cancel')`,
		`select internal.attach_children(array[1::bigint], '{}', 1, 'waiting', 1, null, null)`,
	} {
		_, err := tx.Exec(ctx, "savepoint s")
		require.NoError(t, err)
		_, err = tx.Exec(ctx, sql)
		require.ErrorContains(t, err, "permission denied", sql)
		_, err = tx.Exec(ctx, "rollback to savepoint s")
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, "waiting", statusOf(t, pool, child))
	require.Equal(t, before, scalar[string](t, pool, `select row(t.*)::text from queues.task t where task_id = $1`, parent), "naming a parent changed it")
}
