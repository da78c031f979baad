package taskorch_test

import (
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// An application role granted enqueueing sends careless or hostile parents through every
// enqueue form that now reads them before writing the task (internal.parents_of): an id that
// does not exist (0, negative, the largest bigint), a NULL element, 10,001 parents, a policy
// other than cancel or run, a NULL policy. Each is refused with 22023 naming what is wrong, and
// nothing is written: no task, edge, counter or workflow row. Naming another role's task as a
// parent is allowed and changes nothing on it; the child waits for it.
func TestWorkflowAppRoleHostileParents(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, pool := newClient(t)
	app := "app_" + randomHex(t, 6)
	mustExec(t, pool, "create role "+pgx.Identifier{app}.Sanitize()+" nologin")
	t.Cleanup(func() {
		mustExec(t, pool, "drop owned by "+pgx.Identifier{app}.Sanitize()+"; drop role "+pgx.Identifier{app}.Sanitize())
	})
	mustExec(t, pool, `select queues.grant_enqueue($1)`, app)
	other := scalar[int64](t, pool, `select queues.enqueue('wf.other', '{"secret": 1}')`)
	before := scalar[string](t, pool, `select row(t.*)::text from queues.task t where task_id = $1`, other)
	counts := `select (select count(*) from queues.task) || ' ' || (select count(*) from queues.task_edge) || ' ' ||
		(select count(*) from queues.task_wait_stripe) || ' ' || (select count(*) from queues.workflow_task)`
	empty := scalar[string](t, pool, counts)

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	mustExec(t, conn, "set role "+pgx.Identifier{app}.Sanitize())
	defer func() { _, _ = conn.Exec(ctx, "reset role") }()

	for _, p := range []struct{ sql, re string }{
		{`select queues.enqueue('wf.c', '{}', _after => array[0::bigint])`, `names task 0, which does not exist`},
		{`select queues.enqueue('wf.c', '{}', _after => array[-5::bigint])`, `names task -5, which does not exist`},
		{`select queues.enqueue('wf.c', '{}', _after => array[9223372036854775807])`, `names task 9223372036854775807, which does not exist`},
		{`select queues.enqueue('wf.c', '{}', _after => array[` + strconv.FormatInt(other, 10) + `, null])`, `must not contain NULL`},
		{`select queues.enqueue('wf.c', '{}', _after => array(select g::bigint from generate_series(1, 10001) g))`, `10001 tasks; at most 10000`},
		{`select queues.enqueue('wf.c', '{}', _after => array[` + strconv.FormatInt(other, 10) + `], _on_parent_failure => 'explode')`, `'cancel' or 'run'`},
		{`select queues.enqueue('wf.c', '{}', _after => array[` + strconv.FormatInt(other, 10) + `], _on_parent_failure => null)`, `'cancel' or 'run'`},
		{`select queues.enqueue_many(array['wf.c', 'wf.c'], array['{}', '{}']::jsonb[], _after => array[` + strconv.FormatInt(other, 10) + `, 424242424242])`,
			`names task 424242424242, which does not exist`},
		{`select queues.enqueue_many(array['wf.c'], array['{}']::jsonb[], _after => array[null::bigint])`, `must not contain NULL`},
		{`select queues.enqueue_many(array['wf.c'], array['{}']::jsonb[], _after => array[` + strconv.FormatInt(other, 10) + `], _on_parent_failure => '')`, `'cancel' or 'run'`},
	} {
		_, err := conn.Exec(ctx, p.sql)
		requireSQLState(t, err, "22023", p.re, p.sql)
	}
	_, err = conn.Exec(ctx, "reset role")
	require.NoError(t, err)
	require.Equal(t, empty, scalar[string](t, pool, counts), "nothing written")

	mustExec(t, conn, "set role "+pgx.Identifier{app}.Sanitize())
	child := scalar[int64](t, conn, `select queues.enqueue('wf.c', '{}', _after => array[$1::bigint])`, other)
	require.Equal(t, "waiting", statusOf(t, pool, child))
	require.Equal(t, other, scalar[int64](t, pool, `select workflow_id from queues.workflow_task where task_id = $1`, child))
	require.Equal(t, before, scalar[string](t, pool, `select row(t.*)::text from queues.task t where task_id = $1`, other),
		"naming a parent changed it")
}
