package taskorch_test

import (
	"context"
	"strings"
	"testing"
	"time"

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
