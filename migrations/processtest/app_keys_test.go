package processtest_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// An application role's idempotency and debounce keys cannot touch another function's tasks or
// a system tick (docs/sql.md, "Keys"): a db_function task's keys are scoped by its function, so
// two functions with one key each get their task while one function with one key deduplicates
// as before; the prefixes the system uses (tick:, schedule:) are refused with 22023 through every
// enqueue and insert function, so a supervisor's pending tick keeps its payload and time and a
// schedule's tick is enqueued, and runs, under its key.
func TestAppKeysCannotTouchOtherFunctionsOrSystemTicks(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	app, _ := hostileRoles(t, pool)
	a := pgx.Identifier{app}.Sanitize()
	mustExec(t, pool, `create schema billing;
		create table billing.ran (fn text not null, at timestamptz not null default clock_timestamp());
		create function billing.recalc(jsonb) returns jsonb language sql security definer set search_path = pg_catalog, pg_temp as
			$$ insert into billing.ran (fn) values ('recalc'); select '{"status": "succeeded"}'::jsonb $$;
		create function billing.close_month(jsonb) returns jsonb language sql security definer set search_path = pg_catalog, pg_temp as
			$$ insert into billing.ran (fn) values ('close_month'); select '{"status": "succeeded"}'::jsonb $$;
		revoke all on function billing.recalc(jsonb), billing.close_month(jsonb) from public`)
	mustExec(t, pool, fmt.Sprintf(`grant usage on schema billing to %[1]s;
		grant execute on function billing.recalc(jsonb), billing.close_month(jsonb) to %[1]s`, a))

	// The application starts an e-mail process: the supervisor's tick is pending, the system's.
	asRoleCommit[int64](t, pool, app, `select comms.send_email('ann@example.com', 'Welcome', 'Hello Ann', _scheduled_at => now() + interval '1 hour')`)
	const tickSQL = `select task_id, payload::text, run_at::text, key_scope, enqueued_by is null from queues.task
		where task_type = 'db_function' and debounce_key = 'tick:comms.send_email_supervisor' and status = 'pending'`
	type tickRow struct {
		id                    int64
		payload, runAt, scope string
		system                bool
	}
	readTick := func() tickRow {
		var r tickRow
		require.NoError(t, pool.QueryRow(t.Context(), tickSQL).Scan(&r.id, &r.payload, &r.runAt, &r.scope, &r.system))
		return r
	}
	tick := readTick()
	require.Equal(t, "comms.send_email_supervisor", tick.scope)
	require.True(t, tick.system, "a tick is the system's task, whoever's call woke it")

	tx := asRole(t, pool, app)
	// 1. The system's prefixes, as a debounce key or an idempotency key, through every function.
	const recalc = `'{"db_function": "billing.recalc"}'::jsonb`
	for _, sql := range []string{
		`select * from queues.enqueue_debounced('db_function', ` + recalc + `, 'tick:comms.send_email_supervisor', '1 hour')`,
		`select * from queues.insert_debounced_task('db_function', ` + recalc + `, 'tick:comms.send_email_supervisor', '1 hour')`,
		`select * from queues.enqueue_debounced('t.plain', '{}', 'schedule:billing-tick:2026-11-27T06:35:00Z', '1 hour')`,
		`select queues.enqueue('db_function', ` + recalc + `, _idempotency_key => 'schedule:billing-tick:2026-11-27T06:35:00Z')`,
		`select * from queues.enqueue_with_result('db_function', ` + recalc + `, _idempotency_key => 'schedule:billing-tick:2026-11-27T06:35:00Z')`,
		`select queues.enqueue('t.plain', '{}', _idempotency_key => 'tick:comms.send_email_supervisor')`,
		`select queues.enqueue_many(array['t.plain', 'db_function'], array['{}', ` + recalc + `], _idempotency_keys => array['ok', 'schedule:billing-tick:x'])`,
		`select * from queues.enqueue_many_with_result(array['t.plain'], array['{}'::jsonb], _idempotency_keys => array['tick:x'])`,
		`select * from queues.insert_task('t.plain', '{}', _idempotency_key => 'schedule:billing-tick:x')`,
		`select * from queues.insert_tasks(array['t.plain'], array['{}'::jsonb], _idempotency_keys => array['schedule:billing-tick:x'])`,
	} {
		requireSQLState(t, probe(t, tx, sql), "22023", sql)
	}
	require.Equal(t, tick, readTick(), "the supervisor's tick kept its payload and time")

	// 2. Keys scoped by function: one key, two functions, two tasks; one function, one task.
	const closeMonth = `'{"db_function": "billing.close_month"}'::jsonb`
	type enq struct {
		id  int64
		dup bool
	}
	one := func(sql string) enq {
		var e enq
		require.NoError(t, tx.QueryRow(t.Context(), sql).Scan(&e.id, &e.dup), sql)
		return e
	}
	r1 := one(`select * from queues.enqueue_with_result('db_function', ` + recalc + `, _idempotency_key => 'month-11')`)
	c1 := one(`select * from queues.enqueue_with_result('db_function', ` + closeMonth + `, _idempotency_key => 'month-11')`)
	require.False(t, r1.dup)
	require.False(t, c1.dup)
	require.NotEqual(t, r1.id, c1.id, "two functions, one key: two tasks")
	require.Equal(t, enq{r1.id, true}, one(`select * from queues.enqueue_with_result('db_function', '{"db_function": "billing.recalc", "v": 2}', _idempotency_key => 'month-11')`),
		"one function, one key: the task it has")
	// The same in a batch, and within one batch.
	var ids []int64
	var dups []bool
	require.NoError(t, tx.QueryRow(t.Context(), `select array_agg(task_id order by ord), array_agg(duplicate order by ord)
		from queues.enqueue_many_with_result(array['db_function', 'db_function', 'db_function', 'db_function'],
			array[`+recalc+`, `+closeMonth+`, `+recalc+`, '{"db_function": "billing.recalc", "v": 3}'::jsonb],
			_idempotency_keys => array['month-11', 'month-11', 'month-12', 'month-12']) with ordinality as r(task_id, duplicate, ord)`).Scan(&ids, &dups))
	require.Equal(t, []int64{r1.id, c1.id, ids[2], ids[2]}, ids)
	require.Equal(t, []bool{true, true, false, true}, dups)
	require.NotContains(t, []int64{r1.id, c1.id}, ids[2])
	// A task type that names no function: one key, one task, as before.
	p1 := scalar[int64](t, tx, `select queues.enqueue('t.plain', '{}', _idempotency_key => 'month-11')`)
	require.Equal(t, p1, scalar[int64](t, tx, `select queues.enqueue('t.plain', '{"v": 2}', _idempotency_key => 'month-11')`))
	require.NotContains(t, []int64{r1.id, c1.id}, p1)

	// Debounce keys: one per function.
	dr := one(`select * from queues.enqueue_debounced('db_function', ` + recalc + `, 'account-7', '1 hour')`)
	dc := one(`select * from queues.enqueue_debounced('db_function', ` + closeMonth + `, 'account-7', '1 hour')`)
	require.False(t, dr.dup)
	require.False(t, dc.dup)
	require.NotEqual(t, dr.id, dc.id)
	require.Equal(t, enq{dr.id, true}, one(`select * from queues.enqueue_debounced('db_function', '{"db_function": "billing.recalc", "v": 2}', 'account-7', '1 hour')`))
	require.NoError(t, tx.Commit(t.Context()))
	require.Equal(t, `{"db_function": "billing.close_month"}`, scalar[string](t, pool, `select payload::text from queues.task where task_id = $1`, dc.id),
		"the other function's debounced task kept its payload")
	require.Equal(t, tick, readTick())

	// 3. A schedule of the same function ticks under its key, the leader's (a real worker's).
	mustExec(t, pool, `select queues.add_schedule('billing-tick', '@every 1s', 'db_function', `+closeMonth+`)`)
	startWorker(t, pool, nil)
	waitTrue(t, pool, "a tick of the schedule ran", `select exists (select from queues.task
		where idempotency_key like 'schedule:billing-tick:%' and status = 'completed')`)
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.task
		where idempotency_key like 'schedule:billing-tick:%' and (key_scope <> 'billing.close_month' or enqueued_by is not null)`),
		"the schedule's ticks are the system's, scoped by their function")
	require.NotZero(t, scalar[int64](t, pool, `select count(*) from billing.ran where fn = 'close_month'`))
}
