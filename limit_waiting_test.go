package taskorch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// A limit set or removed while workflow children wait for their parent governs them when they
// are released: set_limit and remove_limit re-key waiting tasks as they do pending ones. A child
// released with the limit of when it was enqueued would be stuck: a limited type's task with no
// limit, or a task under a limit that is gone, is claimed by neither claim path.
func TestLimitChangeRekeysWaitingTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	mustExec(t, pool, `create schema billing;
		create function billing.recalc(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;`)
	// parent enqueues a task of type typ (the only pending one) and claims it.
	parent := func(typ string) (id, lease int64) {
		id = scalar[int64](t, pool, `select queues.enqueue($1, '{}')`, typ)
		require.NoError(t, pool.QueryRow(ctx, `select lease_id from queues.claim_tasks_by_id('w', array[$1::bigint], interval '5 minutes')`, id).Scan(&lease))
		return id, lease
	}
	children := func(parentID int64, n int, typ, payload string) []int64 {
		return scalar[[]int64](t, pool, `select array_agg(queues.enqueue($1, $2::jsonb, _after => array[$3::bigint])) from generate_series(1, $4)`,
			typ, payload, parentID, n)
	}
	limitsOf := func(ids []int64) []*string {
		return scalar[[]*string](t, pool, `select array_agg(limit_name order by task_id) from queues.task where task_id = any ($1) and status = 'waiting'`, ids)
	}
	str := func(s string) *string { return &s }
	complete := func(id, lease int64) {
		mustExec(t, pool, `select queues.complete_task($1, $2)`, id, lease)
	}

	// A limit set while three children wait holds them once released: one at a time.
	p1, l1 := parent("rk.parent")
	first := children(p1, 3, "rk.child", `{}`)
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "rk.child", MaxRunning: 1}))
	require.Equal(t, []*string{str("rk.child"), str("rk.child"), str("rk.child")}, limitsOf(first))
	complete(p1, l1)
	running := claim(t, pool, "w", 10, "5 minutes")
	require.Len(t, running, 1, "the limit holds the released children")
	require.Equal(t, "rk.child", running[0].Type)
	require.Empty(t, claim(t, pool, "w", 10, "5 minutes"))

	// A limit removed while children wait frees them once released: all of them run.
	p2, l2 := parent("rk.parent")
	second := children(p2, 2, "rk.child", `{}`)
	require.Equal(t, []*string{str("rk.child"), str("rk.child")}, limitsOf(second), "enqueued under the limit")
	require.NoError(t, c.RemoveLimit(ctx, "rk.child"))
	require.Equal(t, []*string{nil, nil}, limitsOf(second))
	complete(p2, l2)
	require.Len(t, claim(t, pool, "w", 10, "5 minutes"), 4, "two left of the first three, and the two released now")

	// One function's limit, set and removed, re-keys that function's waiting tasks.
	p3, l3 := parent("rk.parent")
	fn := children(p3, 2, "db_function", `{"db_function": "billing.recalc"}`)
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "db_function:billing.recalc", MaxRunning: 1}))
	require.Equal(t, []*string{str("db_function:billing.recalc"), str("db_function:billing.recalc")}, limitsOf(fn))
	require.NoError(t, c.RemoveLimit(ctx, "db_function:billing.recalc"))
	require.Equal(t, []*string{nil, nil}, limitsOf(fn))
	complete(p3, l3)
	require.Len(t, claim(t, pool, "w", 10, "5 minutes"), 2)
}
