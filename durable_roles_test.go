package taskorch_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// The durable workflows' SQL functions, called as the roles that may or may not call them, with
// what a careless or hostile caller sends. An application role granted enqueueing may call none of
// them, nor touch the checkpoints table, nor read the queue depth. The worker role, which may
// call them, writes a checkpoint, a wait, a spawn or a suspension only under a task's current
// lease: another task's id with a guessed lease writes nothing, and NULLs, infinities, empty or
// oversized input are refused with 22023 and write nothing.
func TestDurableWorkflowFunctionsAsRoles(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	app := "app_" + randomHex(t, 6)
	mustExec(t, pool, "create role "+pgx.Identifier{app}.Sanitize()+" nologin")
	t.Cleanup(func() {
		mustExec(t, pool, "drop owned by "+pgx.Identifier{app}.Sanitize()+"; drop role "+pgx.Identifier{app}.Sanitize())
	})
	mustExec(t, pool, `select queues.grant_enqueue($1)`, app)

	mine := scalar[int64](t, pool, `select queues.enqueue('dwf.mine', '{}')`)
	lease := claimOne(t, pool, "dwf.mine", mine)
	other := scalar[int64](t, pool, `select queues.enqueue('dwf.other', '{}')`)
	otherLease := claimOne(t, pool, "dwf.other", other)
	done := scalar[int64](t, pool, `select queues.enqueue('dwf.done', '{}')`)
	completeUnder(t, pool, []int64{done}, []int64{claimOne(t, pool, "dwf.done", done)})
	snapshot := func() string {
		return scalar[string](t, pool, `select concat_ws('|',
			(select string_agg(row(t.task_id, t.status, t.lease_id, t.lease_expires_at, t.attempt, t.run_at, t.after_ids)::text, ',' order by t.task_id) from queues.task t),
			(select count(*) from queues.workflow_step), (select count(*) from queues.signal_wait), (select count(*) from queues.task_edge))`)
	}
	before := snapshot()

	for _, sql := range []string{
		`select * from queues.record_workflow_step($1, $2, 1, 'step', 'a', '1')`,
		`select * from queues.workflow_steps($1) where $2::bigint is not null`,
		`select * from queues.await_workflow_signal($1, $2, 1, 'n', 'k', now() + interval '1 hour')`,
		`select * from queues.spawn_workflow_task($1, $2, 1, 'x', 'dwf.child', '{}')`,
		`select * from queues.await_workflow_tasks($1, $2, 1, 'x', array[3::bigint])`,
		`select * from queues.record_workflow_steps(array[$1::bigint], array[$2::bigint], '{1}', '{a}', '{1}', array[now()])`,
		`select * from queues.workflow_steps_of(array[$1::bigint, $2::bigint])`,
		`select queues.queue_depth() where $1::bigint + $2::bigint > 0`,
		`select * from queues.workflow_step where $1::bigint + $2::bigint > 0`,
		`insert into queues.workflow_step (task_id, seq, kind, name, lease_id, attempt) values ($1, 1, 'step', 'forged', $2, 1)`,
	} {
		err := probeAs(t, pool, app, sql, mine, lease)
		require.ErrorContains(t, err, "permission denied", "the application role: %s", sql)
	}

	const w = "worker_service_user"
	// Another task's id with a lease guessed wrong: nothing written.
	for _, sql := range []string{
		`select recorded::text from queues.record_workflow_step($1, $2, 1, 'step', 'forged', '1')`,
		`select outcome from queues.await_workflow_signal($1, $2, 1, 'n', 'k', now() + interval '1 hour')`,
		`select outcome from queues.spawn_workflow_task($1, $2, 1, 'x', 'dwf.child', '{}')`,
		fmt.Sprintf(`select outcome from queues.await_workflow_tasks($1, $2, 1, 'x', array[%d::bigint])`, mine),
	} {
		var got string
		err := asRoleScalar(t, pool, w, sql, &got, other, otherLease+1000)
		require.NoError(t, err, sql)
		require.Contains(t, []string{"false", "lease_lost"}, got, sql)
	}
	// A group of step checkpoints: each row is recorded under its own lease only. The stale
	// rows (another task with a guessed lease, a completed task) write nothing, the good one is
	// recorded, and a position that holds a checkpoint already is not overwritten.
	var group string
	require.NoError(t, asRoleScalar(t, pool, w, `select string_agg(recorded::text, ',') from queues.record_workflow_steps(
			array[$1::bigint, $3::bigint, $4::bigint], array[$2::bigint, $5::bigint, $2::bigint],
			'{1,1,1}', '{good,forged,late}', '{1,2,3}', array[now(), now(), now()])`,
		&group, mine, lease, other, done, otherLease+1000))
	require.Equal(t, "true,false,false", group)
	// The same position twice in one group: the first is recorded, the second is not.
	require.NoError(t, asRoleScalar(t, pool, w, `select string_agg(recorded::text, ',') from queues.record_workflow_steps(
			array[$1::bigint, $1::bigint], array[$2::bigint, $2::bigint], '{1,1}', '{good,again}', '{1,2}', array[now(), now()])`,
		&group, mine, lease))
	require.Equal(t, "true,false", group)
	// A stale run's row for a position, first in the group, beside the current lease's row for
	// the same position (a run that lost its lease finishing the step as the run that took the
	// task over does): the current lease's row is recorded, the stale one is not.
	require.NoError(t, asRoleScalar(t, pool, w, `select string_agg(recorded::text, ',') from queues.record_workflow_steps(
			array[$1::bigint, $1::bigint], array[$3::bigint, $2::bigint], '{1,1}', '{stale,current}', '{1,2}', array[now(), now()])`,
		&group, mine, lease, lease+1000))
	require.Equal(t, "false,true", group)

	// A completed task's id with its old lease: nothing written either.
	var got string
	require.NoError(t, asRoleScalar(t, pool, w, `select recorded::text from queues.record_workflow_step($1, $2, 1, 'step', 'late', '1')`, &got, done, lease))
	require.Equal(t, "false", got)
	require.NoError(t, asRoleScalar(t, pool, w, `select recorded::text from queues.record_workflow_steps(array[$1::bigint], array[$2::bigint], '{1}', '{late}', '{1}', array[now()])`, &got, done, lease))
	require.Equal(t, "false", got)

	// Bad input: 22023, nothing written.
	huge := strings.Repeat("x", 600)
	for _, sql := range []string{
		`select * from queues.record_workflow_step($1, $2, null, 'step', 'a', '1')`,
		`select * from queues.record_workflow_step($1, $2, 1, null, 'a', '1')`,
		`select * from queues.record_workflow_step($1, $2, 1, 'step', null, '1')`,
		`select * from queues.record_workflow_step($1, $2, 2147483647, 'step', 'a', '1')`,
		`select * from queues.record_workflow_step($1, $2, 1, 'sleep', 'a', null, 'infinity'::interval)`,
		`select * from queues.record_workflow_steps(null, array[$2::bigint], '{1}', '{a}', '{1}', array[now()]) where $1::bigint > 0`,
		`select * from queues.record_workflow_steps('{}', '{}', '{}', '{}', '{}', '{}') where $1::bigint + $2::bigint > 0`,
		`select * from queues.record_workflow_steps(array[$1::bigint, $1::bigint], array[$2::bigint], '{1}', '{a}', '{1}', array[now()])`,
		`select * from queues.record_workflow_steps(array[$1::bigint], array[$2::bigint], '{1}', '{a}', '{1}', null)`,
		`select * from queues.record_workflow_steps(array[$1::bigint], array[null::bigint], '{1}', '{a}', '{1}', array[now()]) where $2::bigint > 0`,
		`select * from queues.record_workflow_steps(array[$1::bigint], array[$2::bigint], '{0}', '{a}', '{1}', array[now()])`,
		`select * from queues.record_workflow_steps(array[$1::bigint], array[$2::bigint], '{null}', '{a}', '{1}', array[now()])`,
		`select * from queues.record_workflow_steps(array[$1::bigint], array[$2::bigint], '{1}', '{""}', '{1}', array[now()])`,
		`select * from queues.record_workflow_steps(array[$1::bigint], array[$2::bigint], '{1}', '{null}', '{1}', array[now()])`,
		`select * from queues.record_workflow_steps(array[$1::bigint], array[$2::bigint], '{1}', array['` + huge + `'], '{1}', array[now()])`,
		`select * from queues.record_workflow_steps(array(select $1::bigint from generate_series(1, 10001)), array(select $2::bigint from generate_series(1, 10001)), array(select 1 from generate_series(1, 10001)), array(select 'a' from generate_series(1, 10001)), array(select '1'::jsonb from generate_series(1, 10001)), array(select now() from generate_series(1, 10001)))`,
		`select * from queues.workflow_steps_of(null) where $1::bigint + $2::bigint > 0`,
		`select * from queues.workflow_steps_of('{}') where $1::bigint + $2::bigint > 0`,
		`select * from queues.workflow_steps_of(array(select generate_series(1, 10001)::bigint)) where $1::bigint + $2::bigint > 0`,
		`select * from queues.await_workflow_signal($1, $2, 1, null, 'k', now() + interval '1 hour')`,
		`select * from queues.await_workflow_signal($1, $2, 1, 'n', '` + huge + `', now() + interval '1 hour')`,
		`select * from queues.await_workflow_signal($1, $2, 1, 'n', 'k', '-infinity')`,
		`select * from queues.spawn_workflow_task($1, $2, 1, 'x', 'db_function', '{"db_function": "queues.cancel_task"}')`,
		`select * from queues.spawn_workflow_task($1, $2, 1, 'x', 'dwf.child', '[1]')`,
		`select * from queues.spawn_workflow_task($1, $2, 1, 'x', 'dwf.child', '{}', 'infinity')`,
		`select * from queues.await_workflow_tasks($1, $2, 1, 'x', null)`,
		`select * from queues.await_workflow_tasks($1, $2, 1, 'x', '{}')`,
		`select * from queues.await_workflow_tasks($1, $2, 1, 'x', array[null::bigint])`,
		`select * from queues.await_workflow_tasks($1, $2, 1, 'x', array(select generate_series(1, 10001)::bigint))`,
		`select * from queues.await_workflow_tasks($1, $2, 1, 'x', array[$1::bigint])`,
		`select * from queues.await_workflow_tasks($1, $2, 1, 'x', array[987654321::bigint])`,
	} {
		err := probeAs(t, pool, w, sql, mine, lease)
		if strings.Contains(sql, "'infinity'::interval") {
			// PostgreSQL 15 has no infinite interval: the cast itself is refused (22007/22008).
			require.Error(t, err, sql)
			continue
		}
		requireSQLState(t, err, "22023", ".", sql)
	}
	require.Equal(t, before, snapshot(), "a refused call wrote something")
}

// asRoleScalar runs sql as role in a transaction that is rolled back, scanning its one value.
func asRoleScalar(t *testing.T, pool *pgxpool.Pool, role, sql string, dst any, args ...any) error {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `set local role `+pgx.Identifier{role}.Sanitize())
	require.NoError(t, err)
	return tx.QueryRow(ctx, sql, args...).Scan(dst)
}
