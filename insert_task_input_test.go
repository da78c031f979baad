package taskorch_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// queues.insert_task and queues.insert_tasks, which the Go client calls directly for tasks that
// name no function, test every input rule in one expression (docs/design.md, "Enqueue"): each
// broken rule still raises SQLSTATE 22023 with a message naming what is wrong, and nothing is
// written; the inputs at the edge of each rule are accepted. The rows are also refused by the
// task table's finite-times check when inserted directly.
func TestInsertTaskRefusesBadInput(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pool := dbtest.NewDB(t)
	count := func() int64 { return scalar[int64](t, pool, `select count(*) from queues.task`) }

	big := `'{"a": "` + strings.Repeat("x", 8*1024*1024) + `"}'::jsonb`
	for _, tc := range []struct{ args, re string }{
		{`null, '{}'`, `task_type must not be empty`},
		{`'', '{}'`, `task_type must not be empty`},
		{`'1abc', '{}'`, `task_type '1abc' is malformed`},
		{`'a b', '{}'`, `task_type 'a b' is malformed`},
		{`'` + strings.Repeat("a", 129) + `', '{}'`, `task_type .* is malformed`},
		{`'t', null`, `payload must be a JSON object, got null`},
		{`'t', '[]'`, `payload must be a JSON object, got array`},
		{`'t', '1'`, `payload must be a JSON object, got number`},
		{`'t', ` + big, `payload is \d+ bytes, over the limit of 8388608 bytes`},
		{`'t', '{}', _max_attempts => 0`, `max_attempts must be at least 1, got 0`},
		{`'t', '{}', _idempotency_key => ''`, `idempotency_key must be 1 to 512 characters, got 0`},
		{`'t', '{}', _idempotency_key => repeat('k', 513)`, `idempotency_key must be 1 to 512 characters, got 513`},
		{`'t', '{}', _scheduled_at => 'infinity'`, `_scheduled_at`},
		{`'t', '{}', _scheduled_at => '-infinity'`, `_scheduled_at`},
		{`'t', '{}', _scheduled_at => '10000-01-01 00:00:00+00'`, `_scheduled_at`},
	} {
		single := `select * from queues.insert_task(` + tc.args + `)`
		_, err := pool.Exec(ctx, single)
		requireSQLState(t, err, "22023", tc.re, single[:min(len(single), 120)])
		require.Zero(t, count(), single[:min(len(single), 120)])
	}

	// The batch: the first bad task is named by its position.
	for _, tc := range []struct{ sql, re string }{
		{`select * from queues.insert_tasks(array['t', '1x'], array['{}', '{}']::jsonb[])`, `task 2 of 2: task_type '1x' is malformed`},
		{`select * from queues.insert_tasks(array['t', 't'], array['{}', '[]']::jsonb[])`, `task 2 of 2: payload must be a JSON object`},
		{`select * from queues.insert_tasks(array['t'], array['{}']::jsonb[], _max_attempts => array[0])`, `task 1 of 1: max_attempts must be at least 1`},
		{`select * from queues.insert_tasks(array['t', 't'], array['{}', '{}']::jsonb[], _scheduled_ats => array[now(), 'infinity'])`, `task 2 of 2.*_scheduled_ats`},
		{`select * from queues.insert_tasks(array['t', 't'], array['{}']::jsonb[])`, `the arrays must all have 2 elements`},
	} {
		_, err := pool.Exec(ctx, tc.sql)
		requireSQLState(t, err, "22023", tc.re, tc.sql)
		require.Zero(t, count(), tc.sql)
	}

	// A time out of range written straight into the table breaks the finite-times check.
	_, err := pool.Exec(ctx, `insert into queues.task (task_type, payload, run_at) values ('t', '{}', 'infinity')`)
	requireSQLState(t, err, "23514", `task_times_finite`, "insert run_at infinity")
	require.Zero(t, count())

	// The edges of each rule are accepted.
	for _, sql := range []string{
		`select * from queues.insert_task('a', '{}')`,
		`select * from queues.insert_task('` + strings.Repeat("a", 128) + `', '{}', _max_attempts => 1)`,
		`select * from queues.insert_task('A1_.:-', '{}', _idempotency_key => repeat('k', 512))`,
		`select * from queues.insert_task('t', '{}', _scheduled_at => '0001-01-01 00:00:00+00')`,
		`select * from queues.insert_task('t', '{}', _scheduled_at => '9999-12-31 23:59:59+00')`,
		`select * from queues.insert_task('t', '{}', _scheduled_at => null)`,
	} {
		mustExec(t, pool, sql)
	}
	require.Equal(t, int64(6), count())
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.task where scheduled_at is null or run_at is null`),
		"a NULL time is the current time")
}

// The rules of what an enqueue writes hold for rows written straight into queues.task too, on
// insert and on an update that sets their columns: the trigger task_input_valid (which replaced
// their CHECK constraints, core/0107) refuses each broken rule with SQLSTATE 23514 under the
// constraint's name, and nothing is written or changed. The rules an update can break are
// still constraints, and a claim, which sets none of these columns, is unaffected.
func TestTaskRowRulesHoldForDirectWrites(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pool := dbtest.NewDB(t)
	count := func() int64 { return scalar[int64](t, pool, `select count(*) from queues.task`) }

	refuse := func(sql, constraint string) {
		t.Helper()
		_, err := pool.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s: want 23514, got %v", sql[:min(len(sql), 120)], err)
		require.Equal(t, "23514", pgErr.Code, sql[:min(len(sql), 120)])
		require.Equal(t, constraint, pgErr.ConstraintName, sql[:min(len(sql), 120)])
		require.Equal(t, "task", pgErr.TableName)
		require.Equal(t, "queues", pgErr.SchemaName)
		require.Equal(t, `new row for relation "task" violates check constraint "`+constraint+`"`, pgErr.Message)
	}
	ins := func(cols, vals string) string {
		return `insert into queues.task (task_type, payload` + cols + `) values (` + vals + `)`
	}
	big := `jsonb_build_object('a', repeat('x', 9 * 1024 * 1024))`
	for _, tc := range []struct{ sql, constraint string }{
		{ins(``, `'1abc', '{}'`), "task_type_valid"},
		{ins(``, `repeat('a', 129), '{}'`), "task_type_valid"},
		{ins(``, `'t', '[]'`), "task_payload_is_object"},
		{ins(``, `'t', '"s"'`), "task_payload_is_object"},
		{ins(``, `'t', `+big), "task_payload_size"},
		{ins(`, max_attempts`, `'t', '{}', 0`), "task_max_attempts_positive"},
		{ins(`, idempotency_key`, `'t', '{}', ''`), "task_idempotency_key_valid"},
		{ins(`, idempotency_key`, `'t', '{}', repeat('k', 513)`), "task_idempotency_key_valid"},
		{ins(`, debounce_key`, `'t', '{}', ''`), "task_debounce_key_valid"},
		{ins(`, on_parent_failure`, `'t', '{}', 'skip'`), "task_on_parent_failure_valid"},
		{ins(`, run_at`, `'t', '{}', '-infinity'`), "task_times_finite"},
		{ins(`, status, lease_id`, `'t', '{}', 'running', 1`), "task_running_has_lease"},
		// The first broken rule is the one named.
		{ins(`, max_attempts`, `'1abc', '[]', 0`), "task_type_valid"},
	} {
		refuse(tc.sql, tc.constraint)
		require.Zero(t, count(), tc.sql[:min(len(tc.sql), 120)])
	}

	// The edges are accepted.
	id := scalar[int64](t, pool, ins(`, max_attempts, idempotency_key, debounce_key, on_parent_failure`,
		`repeat('a', 128), '{}', 1, repeat('k', 512), repeat('d', 512), 'run'`)+` returning task_id`)
	before := scalar[string](t, pool, `select row_to_json(t)::text from queues.task t where task_id = $1`, id)

	// Updates that set a rule's column are checked; the row is unchanged.
	upd := func(set string) string {
		return `update queues.task set ` + set + ` where task_id = ` + strconv.FormatInt(id, 10)
	}
	for _, tc := range []struct{ sql, constraint string }{
		{upd(`task_type = 'a b'`), "task_type_valid"},
		{upd(`payload = '[]'`), "task_payload_is_object"},
		{upd(`payload = ` + big), "task_payload_size"},
		{upd(`max_attempts = 0`), "task_max_attempts_positive"},
		{upd(`idempotency_key = ''`), "task_idempotency_key_valid"},
		{upd(`on_parent_failure = 'skip'`), "task_on_parent_failure_valid"},
		{upd(`debounce_key = ''`), "task_debounce_key_valid"},
		{upd(`run_at = 'infinity'`), "task_times_finite"},
		{upd(`result = ` + big), "task_result_size"},
	} {
		refuse(tc.sql, tc.constraint)
		require.Equal(t, before, scalar[string](t, pool, `select row_to_json(t)::text from queues.task t where task_id = $1`, id), tc.sql[:min(len(tc.sql), 120)])
	}
	// An update of other columns of a row the rules accept goes through.
	mustExec(t, pool, upd(`priority = 5, debounce_key = null`))
	require.Equal(t, int64(1), count())
}
