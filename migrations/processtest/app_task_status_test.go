package processtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// asRoleCommit runs sql as role in a transaction of its own, commits it, and returns its one
// value: what an application's session does and keeps.
func asRoleCommit[T any](t *testing.T, pool *pgxpool.Pool, role, sql string, args ...any) T {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	mustExec(t, tx, "set local role "+pgx.Identifier{role}.Sanitize())
	v := scalar[T](t, tx, sql, args...)
	require.NoError(t, tx.Commit(ctx))
	return v
}

// statusRow is a row of queues.get_task_status(es).
type statusRow struct {
	TaskID      int64           `json:"task_id"`
	Status      string          `json:"status"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	Result      json.RawMessage `json:"result"`
	LastError   *string         `json:"last_error"`
	FinishedAt  *string         `json:"finished_at"`
}

// statuses runs a status query as the transaction's role and returns its rows, as JSON and
// decoded: the JSON text is the whole answer, to compare two answers as they are.
func statuses(t *testing.T, tx pgx.Tx, sql string, args ...any) (string, []statusRow) {
	t.Helper()
	text := scalar[string](t, tx, `select coalesce(json_agg(s order by s.task_id), '[]')::text from (`+sql+`) s`, args...)
	var rows []statusRow
	require.NoError(t, json.Unmarshal([]byte(text), &rows))
	return text, rows
}

// An application role reads the status, attempts, result and last error of the tasks it
// enqueued, one by one or up to 1,000 at once, and nothing of any other task: another role's
// task, the system's tick its own kickoff woke, and a task from before core/0090 answer exactly
// as a task that does not exist. A role that is a member of it sees its tasks too; bad input is
// 22023; a role without the grant is refused.
func TestAppRoleReadsOnlyItsOwnTaskStatus(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	app, operator := hostileRoles(t, pool)
	other, _ := hostileRoles(t, pool)

	ids := asRoleCommit[[]int64](t, pool, app, `select array[queues.enqueue('t.status', '{}'),
		(select task_id from queues.enqueue_with_result('t.status', '{}')),
		(select task_id from queues.enqueue_many_with_result(array['t.status'], array['{}'::jsonb]))]`)
	require.Len(t, ids, 3)
	theirs := asRoleCommit[int64](t, pool, other, `select queues.enqueue('t.status', '{}')`)
	email := asRoleCommit[int64](t, pool, app, `select comms.send_email('ann@example.com', 'Welcome', 'Hello Ann')`)
	tick := scalar[int64](t, pool, `select task_id from queues.task
		where debounce_key = 'tick:comms.send_email_supervisor' and status = 'pending'`)
	require.NotZero(t, email)
	require.Equal(t, app, scalar[string](t, pool, `select enqueued_by::text from queues.task where task_id = $1`, ids[0]))

	// The worker's side, by hand: the first completes with a result, the second fails for good.
	type lease struct{ id, lease int64 }
	var leases []lease
	rows, err := pool.Query(context.Background(), `select task_id, lease_id from queues.claim_tasks('w', 2, interval '1 minute', array['t.status']) order by task_id`)
	require.NoError(t, err)
	for rows.Next() {
		var l lease
		require.NoError(t, rows.Scan(&l.id, &l.lease))
		leases = append(leases, l)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []lease{{ids[0], leases[0].lease}, {ids[1], leases[1].lease}}, leases)
	mustExec(t, pool, `select queues.complete_tasks_with_results(array[$1::bigint], array[$2::bigint], array['{"total": 42}'::jsonb])`, ids[0], leases[0].lease)
	mustExec(t, pool, `select queues.fail_task($1, 'card declined', $2, false)`, ids[1], leases[1].lease)

	tx := asRole(t, pool, app)
	_, got := statuses(t, tx, `select * from queues.get_task_status($1)`, ids[0])
	require.Len(t, got, 1)
	require.Equal(t, "completed", got[0].Status)
	require.Equal(t, 1, got[0].Attempt)
	require.JSONEq(t, `{"total": 42}`, string(got[0].Result))
	require.NotNil(t, got[0].FinishedAt)
	_, got = statuses(t, tx, `select * from queues.get_task_status($1)`, ids[1])
	require.Len(t, got, 1)
	require.Equal(t, "failed", got[0].Status)
	require.NotNil(t, got[0].LastError)
	require.Contains(t, *got[0].LastError, "card declined")
	_, got = statuses(t, tx, `select * from queues.get_task_status($1)`, ids[2])
	require.Len(t, got, 1)
	require.Equal(t, "pending", got[0].Status)
	require.Zero(t, got[0].Attempt)
	require.Nil(t, got[0].FinishedAt)

	// Another role's task, the system's tick and an id that does not exist: the same answer.
	missing := scalar[int64](t, pool, `select max(task_id) + 1000 from queues.task`)
	none, _ := statuses(t, tx, `select * from queues.get_task_status($1)`, missing)
	require.Equal(t, "[]", none)
	for _, id := range []int64{theirs, tick} {
		answer, _ := statuses(t, tx, `select * from queues.get_task_status($1)`, id)
		require.Equal(t, none, answer, "task %d", id)
	}
	// The batch: its own tasks once each, in id order; nothing of the rest.
	_, got = statuses(t, tx, `select * from queues.get_task_statuses($1)`, []int64{missing, theirs, ids[2], tick, ids[0], ids[1], ids[0]})
	require.Len(t, got, 3)
	for i, r := range got {
		require.Equal(t, ids[i], r.TaskID)
	}
	// The other role sees its own task, and none of the application's.
	otx := asRole(t, pool, other)
	_, got = statuses(t, otx, `select * from queues.get_task_statuses($1)`, append([]int64{theirs, tick}, ids...))
	require.Len(t, got, 1)
	require.Equal(t, theirs, got[0].TaskID)
	require.NoError(t, otx.Rollback(context.Background()))

	// A task enqueued before core/0090 (enqueued_by NULL) is nobody's.
	mustExec(t, pool, `update queues.task set enqueued_by = null where task_id = $1`, ids[2])
	answer, _ := statuses(t, tx, `select * from queues.get_task_status($1)`, ids[2])
	require.Equal(t, none, answer)

	// A role that is a member of the application's sees its tasks (pg_has_role ... 'MEMBER').
	member := app + "_member"
	mustExec(t, pool, fmt.Sprintf(`create role %s nologin in role %s`, pgx.Identifier{member}.Sanitize(), pgx.Identifier{app}.Sanitize()))
	t.Cleanup(func() { mustExec(t, pool, `drop role `+pgx.Identifier{member}.Sanitize()) })
	mtx := asRole(t, pool, member)
	_, got = statuses(t, mtx, `select * from queues.get_task_statuses($1)`, ids)
	require.Len(t, got, 2, "the application's tasks but the one from before the upgrade")
	require.NoError(t, mtx.Rollback(context.Background()))

	// A task of a role dropped since is nobody's, and the batch that names it still answers.
	gone := app + "_gone"
	g := pgx.Identifier{gone}.Sanitize()
	mustExec(t, pool, `create role `+g+` nologin`)
	mustExec(t, pool, `select queues.grant_enqueue($1::regrole)`, gone)
	goneTask := asRoleCommit[int64](t, pool, gone, `select queues.enqueue('t.status', '{}')`)
	mustExec(t, pool, `drop owned by `+g+`; drop role `+g)
	_, got = statuses(t, tx, `select * from queues.get_task_statuses($1)`, []int64{goneTask, ids[0]})
	require.Len(t, got, 1)
	require.Equal(t, ids[0], got[0].TaskID)

	// Bad input: 22023, naming the argument.
	for _, sql := range []string{
		`select * from queues.get_task_status(null)`,
		`select * from queues.get_task_statuses(null)`,
		`select * from queues.get_task_statuses(array[1, null]::bigint[])`,
		`select * from queues.get_task_statuses(array(select generate_series(1, 1001)::bigint))`,
	} {
		requireSQLState(t, probe(t, tx, sql), "22023", sql)
	}
	require.Len(t, scalar[[]int64](t, tx, `select coalesce(array_agg(task_id), '{}') from queues.get_task_statuses(array(select generate_series(1, 1000)::bigint))`),
		2, "1,000 ids is within the bound")
	// Not granted: the worker, an operator without the grant.
	for _, role := range []string{"worker_service_user", operator} {
		rtx := asRole(t, pool, role)
		for _, sql := range []string{`select * from queues.get_task_status(1)`, `select * from queues.get_task_statuses('{1}')`} {
			requireSQLState(t, probe(t, rtx, sql), "42501", role+": "+sql)
		}
		require.NoError(t, rtx.Rollback(context.Background()))
	}
}
