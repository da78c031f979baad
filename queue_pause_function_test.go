package taskorch_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// One SQL function, one queue: pausing db_function:<function> holds that function's tasks alone
// (the claim without limits and with them, a claim by id as the transports make, the queue
// depth), while the other functions' tasks run; resuming it lets them run. A name that is not a
// function is refused.
func TestPauseOneFunction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	mustExec(t, pool, `create schema billing; create schema reports;
		create function billing.close_month(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;
		create function reports.daily(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;`)
	enqueue := func(fn string) int64 {
		return scalar[int64](t, pool, `select queues.enqueue('db_function', jsonb_build_object('db_function', $1::text))`, fn)
	}
	functionOf := func(cs []claimed) []string {
		var out []string
		for _, c := range cs {
			out = append(out, scalar[string](t, pool, `select payload->>'db_function' from queues.task where task_id = $1`, c.TaskID))
		}
		return out
	}

	changed, err := c.PauseQueue(ctx, "db_function:billing.close_month", "ops")
	require.NoError(t, err)
	require.True(t, changed)
	held := []int64{enqueue("billing.close_month"), enqueue("billing.close_month")}
	enqueue("reports.daily")
	require.Equal(t, int64(1), scalar[int64](t, pool, `select queues.queue_depth(array['db_function'])`), "the paused function's tasks are not counted")
	require.Equal(t, []string{"reports.daily"}, functionOf(claim(t, pool, "w", 10, "5 minutes")))

	// With a limit on another type, the claim takes its other branch: the same.
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "elsewhere", MaxRunning: 1}))
	enqueue("reports.daily")
	require.Equal(t, []string{"reports.daily"}, functionOf(claim(t, pool, "w", 10, "5 minutes")))
	// A claim by id (the Redis and SQS transports') skips them too.
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from queues.claim_tasks_by_id('w', $1::bigint[], interval '5 minutes')`, held))

	// Pausing the whole type holds every function; resuming the function alone then frees none.
	_, err = c.PauseQueue(ctx, "db_function", "ops")
	require.NoError(t, err)
	enqueue("reports.daily")
	require.Empty(t, claim(t, pool, "w", 10, "5 minutes"))
	_, err = c.ResumeQueue(ctx, "db_function")
	require.NoError(t, err)
	require.Equal(t, []string{"reports.daily"}, functionOf(claim(t, pool, "w", 10, "5 minutes")))

	changed, err = c.ResumeQueue(ctx, "db_function:billing.close_month")
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, []string{"billing.close_month", "billing.close_month"}, functionOf(claim(t, pool, "w", 10, "5 minutes")))

	for _, name := range []string{"db_function:Billing.close", "db_function:close_month", "db_function:a.b.c", "db_function:"} {
		_, err := c.PauseQueue(ctx, name, "ops")
		require.ErrorIs(t, err, taskorch.ErrInvalidInput, name)
	}
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from queues.queue_pause`))

	// Pausing is an operator's: an application's role and the worker's may not pause a function
	// (or anything), nor call the claim's internal readers; nothing is written.
	app := "app_" + randomHex(t, 6)
	mustExec(t, pool, "create role "+pgx.Identifier{app}.Sanitize()+" nologin")
	t.Cleanup(func() {
		mustExec(t, pool, "drop owned by "+pgx.Identifier{app}.Sanitize()+"; drop role "+pgx.Identifier{app}.Sanitize())
	})
	mustExec(t, pool, `select queues.grant_enqueue($1)`, app)
	for _, role := range []string{app, "worker_service_user"} {
		for _, sql := range []string{
			`select queues.pause_queue('db_function:reports.daily')`,
			`select queues.pause_queue('db_function')`,
			`select queues.resume_queue('db_function:billing.close_month')`,
			`select internal.unlimited_claimable('{}', null, '{}', 10)`,
			`select internal.due_window('{}', null, '{}', 10)`,
		} {
			require.ErrorContains(t, probeAs(t, pool, role, sql), "permission denied", "%s: %s", role, sql)
		}
	}
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from queues.queue_pause`))
}
