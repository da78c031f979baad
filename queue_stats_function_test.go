package taskorch_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// queues.queue_stats() reports each SQL function as a queue of its own,
// db_function:<schema.function>, to the worker's role (the leader samples it for the gauges),
// with the workers that claim db_function; the type db_function has no row while every task of
// it names its function. An application's role may not read it, nor set or remove a limit.
func TestQueueStatsPerFunction(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	mustExec(t, pool, `create schema billing; create schema reports;
		create function billing.recalc(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;
		create function reports.daily(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;
		select queues.register_worker('w-db', 'host', 1, 4, 'v1', null, array['db_function']);`)
	parent := scalar[int64](t, pool, `select queues.enqueue('qs.parent', '{}', now() + interval '1 hour')`)
	mustExec(t, pool, `
		select queues.enqueue('db_function', '{"db_function": "billing.recalc"}', now() - interval '1 minute') from generate_series(1, 2);
		select queues.enqueue('db_function', '{"db_function": "reports.daily"}', now() + interval '1 hour');`)
	mustExec(t, pool, `select queues.enqueue('db_function', '{"db_function": "billing.recalc"}', _after => array[$1::bigint])`, parent)

	type stat struct {
		queue, status string
		tasks, due    int64
		workers       int64
	}
	rows, err := asRoleQuery(t, pool, "worker_service_user",
		`select task_type, status, tasks, due, workers, oldest_pending_age_seconds from queues.queue_stats() order by 1, 2`)
	require.NoError(t, err)
	var got []stat
	for _, r := range rows {
		got = append(got, stat{r[0].(string), r[1].(string), r[2].(int64), r[3].(int64), r[4].(int64)})
		if r[0] == "db_function:billing.recalc" && r[1] == "pending" {
			require.InDelta(t, 60, r[5].(float64), 30, "its oldest due task was due a minute ago")
		}
	}
	require.Equal(t, []stat{
		{"db_function:billing.recalc", "pending", 2, 2, 1},
		{"db_function:billing.recalc", "waiting", 1, 0, 1},
		{"db_function:reports.daily", "pending", 1, 0, 1},
		{"qs.parent", "pending", 1, 0, 0},
	}, got)

	app := "app_" + randomHex(t, 6)
	mustExec(t, pool, "create role "+pgx.Identifier{app}.Sanitize()+" nologin")
	t.Cleanup(func() {
		mustExec(t, pool, "drop owned by "+pgx.Identifier{app}.Sanitize()+"; drop role "+pgx.Identifier{app}.Sanitize())
	})
	mustExec(t, pool, `select queues.grant_enqueue($1)`, app)
	for _, sql := range []string{
		`select * from queues.queue_stats()`,
		`select queues.set_limit('db_function:billing.recalc', 1)`,
		`select queues.remove_limit('db_function:billing.recalc')`,
	} {
		require.ErrorContains(t, probeAs(t, pool, app, sql), "permission denied", sql)
	}
}

// asRoleQuery runs sql as role in a transaction that is rolled back and returns its rows'
// values.
func asRoleQuery(t *testing.T, pool *pgxpool.Pool, role, sql string, args ...any) ([][]any, error) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `set local role `+pgx.Identifier{role}.Sanitize())
	require.NoError(t, err)
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]any, error) { return r.Values() })
}
