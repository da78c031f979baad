package taskorch_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// Migration core/0106 on a database with the states it puts right: a failed db_function task
// without its function's scope (from before core/0103) gets it, so once retried by hand its
// function's pause holds it; a waiting task whose limit went stale gets the limit in force.
func TestUpgradeFunctionQueuesListed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	migration, err := os.ReadFile("migrations/core/0106_function_queues_listed.sql")
	require.NoError(t, err)
	mustExec(t, pool, `create schema billing;
		create function billing.recalc(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;`)

	failed := scalar[int64](t, pool, `select queues.enqueue('db_function', '{"db_function": "billing.recalc"}')`)
	var lease int64
	require.NoError(t, pool.QueryRow(ctx, `select lease_id from queues.claim_tasks_by_id('w', array[$1::bigint], interval '5 minutes')`, failed).Scan(&lease))
	mustExec(t, pool, `select queues.fail_task($1, 'boom', $2, false)`, failed, lease)
	parent := scalar[int64](t, pool, `select queues.enqueue('up.parent', '{}', now() + interval '1 hour')`)
	child := scalar[int64](t, pool, `select queues.enqueue('up.child', '{}', _after => array[$1::bigint])`, parent)
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "up.child", MaxRunning: 1}))
	// As an older version left them.
	mustExec(t, pool, `update queues.task set key_scope = '' where task_id = $1`, failed)
	mustExec(t, pool, `update queues.task set limit_name = null, limit_key = null where task_id = $1`, child)

	mustExec(t, pool, string(migration))
	require.Equal(t, "failed billing.recalc", scalar[string](t, pool, `select status || ' ' || key_scope from queues.task where task_id = $1`, failed))
	require.Equal(t, "waiting up.child ''", scalar[string](t, pool,
		`select status || ' ' || limit_name || ' ' || quote_literal(limit_key) from queues.task where task_id = $1`, child))

	_, err = c.PauseQueue(ctx, "db_function:billing.recalc", "ops")
	require.NoError(t, err)
	_, err = c.Retry(ctx, failed)
	require.NoError(t, err)
	require.Empty(t, claim(t, pool, "w", 10, "5 minutes"), "the retried task is held by its function's pause")
}
