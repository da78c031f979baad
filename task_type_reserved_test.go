package taskorch_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// A task type beginning with db_function: names a SQL function's limit and queue, never a task
// (docs/sql.md, "Task types"). Such a task was governed by the function's limit and claimed by a
// worker that asked for db_function tasks only, so an application role could spend the
// function's running slot without any right to the function. Now every way in refuses it and
// writes nothing: the enqueue functions as an application role (22023, the message saying what
// to write instead), the Go client (ErrInvalidInput), a schedule, and an insert by hand (23514, task_type_valid). The limit itself
// is still set by that name and governs the function's real tasks, which a claim then takes.
func TestDbFunctionPrefixIsNotATaskType(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	mustExec(t, pool, `create function public.reserved_fn(jsonb) returns jsonb language sql as 'select $1'`)
	mustExec(t, pool, `select queues.set_limit('db_function:public.reserved_fn', _max_running => 1)`)
	app := "app_" + randomHex(t, 6)
	mustExec(t, pool, "create role "+pgx.Identifier{app}.Sanitize()+" nologin")
	t.Cleanup(func() {
		mustExec(t, pool, "drop owned by "+pgx.Identifier{app}.Sanitize()+"; drop role "+pgx.Identifier{app}.Sanitize())
	})
	mustExec(t, pool, `select queues.grant_enqueue($1)`, app)
	count := func() int { return scalar[int](t, pool, `select count(*)::int from queues.task`) }

	for _, sql := range []string{
		`select queues.enqueue('db_function:public.reserved_fn', '{}')`,
		`select queues.enqueue('db_function:public.reserved_fn', '{}', _idempotency_key => 'k')`,
		`select queues.enqueue_many(array['free', 'db_function:public.reserved_fn'], array['{}', '{}']::jsonb[])`,
		`select queues.enqueue_many(array['db_function:x'], array['{}']::jsonb[], _idempotency_keys => array['k2'])`,
		`select task_id from queues.enqueue_debounced('db_function:public.reserved_fn', '{}', 'd', interval '1 minute')`,
		`select queues.enqueue_with_result('db_function:public.reserved_fn', '{}')`,
	} {
		var id any
		err := asRoleScalar(t, pool, app, sql, &id)
		requireSQLState(t, err, "22023", `task_type 'db_function:\S+' is reserved: a SQL function's task has the type db_function`, sql)
	}
	_, err := c.Enqueue(ctx, raw("db_function:public.reserved_fn", `{}`), nil)
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	require.ErrorContains(t, err, "is reserved")
	_, err = pool.Exec(ctx, `select queues.add_schedule('reserved', '0 3 * * *', 'db_function:public.reserved_fn')`)
	requireSQLState(t, err, "22023", "is reserved", "add_schedule")
	_, err = pool.Exec(ctx, `insert into queues.task (task_type, payload) values ('db_function:public.reserved_fn', '{}')`)
	requireSQLState(t, err, "23514", "task_type_valid", "insert by hand")
	require.Zero(t, count(), "a refused task was written")
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from queues.schedule`))

	// The function's real task is governed by the limit and claimed by a db_function worker.
	real := scalar[int64](t, pool, `select queues.enqueue('db_function', '{"db_function": "public.reserved_fn"}')`)
	require.Equal(t, "db_function:public.reserved_fn", scalar[string](t, pool, `select limit_name from queues.task where task_id = $1`, real))
	require.Equal(t, []int64{real}, scalar[[]int64](t, pool,
		`select array_agg(task_id) from queues.claim_tasks('w', 10, interval '1 minute', array['db_function'])`))
}
