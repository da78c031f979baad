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
	// A completed task's id with its old lease: nothing written either.
	var got string
	require.NoError(t, asRoleScalar(t, pool, w, `select recorded::text from queues.record_workflow_step($1, $2, 1, 'step', 'late', '1')`, &got, done, lease))
	require.Equal(t, "false", got)

	// Bad input: 22023, nothing written.
	huge := strings.Repeat("x", 600)
	for _, sql := range []string{
		`select * from queues.record_workflow_step($1, $2, null, 'step', 'a', '1')`,
		`select * from queues.record_workflow_step($1, $2, 1, null, 'a', '1')`,
		`select * from queues.record_workflow_step($1, $2, 1, 'step', null, '1')`,
		`select * from queues.record_workflow_step($1, $2, 2147483647, 'step', 'a', '1')`,
		`select * from queues.record_workflow_step($1, $2, 1, 'sleep', 'a', null, 'infinity'::interval)`,
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
