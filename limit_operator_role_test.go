package taskorch_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// An operator's role granted set_limit and remove_limit (docs/security.md) limits one SQL
// function by its queue's name and removes the limit; a name that is not a task type or a
// function's queue is refused by both with 22023, and nothing is written.
func TestLimitNamesAsOperator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := newClient(t)
	ops := "ops_" + randomHex(t, 6)
	id := pgx.Identifier{ops}.Sanitize()
	mustExec(t, pool, "create role "+id+" nologin")
	t.Cleanup(func() { mustExec(t, pool, "drop owned by "+id+"; drop role "+id) })
	mustExec(t, pool, `grant usage on schema queues to `+id+`;
		grant execute on function queues.set_limit(text, integer, double precision, integer, text), queues.remove_limit(text) to `+id+`;
		grant select on queues.task_limit to `+id)
	asOps := func(sql string, args ...any) error {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, `set local role `+id)
		require.NoError(t, err)
		if _, err = tx.Exec(ctx, sql, args...); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	limits := func() []string {
		return scalar[[]string](t, pool, `select coalesce(array_agg(task_type || '/' || max_running order by task_type), '{}') from queues.task_limit`)
	}

	require.NoError(t, asOps(`select queues.set_limit('db_function:billing.recalc', 2)`))
	require.Equal(t, []string{"db_function:billing.recalc/2"}, limits())

	for _, name := range []any{nil, "", " ", "db_function:", "db_function:Billing.recalc", "db_function:recalc",
		"db_function:a.b.c", "db_function:billing.recalc'; drop table queues.task; --", "1abc", "bad type"} {
		for _, sql := range []string{`select queues.set_limit($1, 1)`, `select queues.remove_limit($1)`} {
			err := asOps(sql, name)
			requireSQLState(t, err, "22023", ".", sql)
		}
	}
	require.Equal(t, []string{"db_function:billing.recalc/2"}, limits(), "a refused call wrote nothing")

	var removed bool
	require.NoError(t, pool.QueryRow(ctx, `select queues.remove_limit('db_function:reports.daily')`).Scan(&removed))
	require.False(t, removed, "a valid name with no limit: nothing to remove")
	require.NoError(t, asOps(`select queues.remove_limit('db_function:billing.recalc')`))
	require.Empty(t, limits())
}
