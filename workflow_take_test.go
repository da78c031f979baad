package taskorch_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// completeTaking completes tasks under their leases as a worker's completion does when it may
// take up to take of the children they release (queues.complete_tasks_and_take), for worker
// 'wf-test' of types (nil: any); it returns each completion's outcome and the children taken.
func completeTaking(t testing.TB, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, ids, leases []int64, types []string, take int) (map[int64]string, []int64) {
	t.Helper()
	rows, err := db.Query(context.Background(),
		`select task_id, status from queues.complete_tasks_and_take($1, $2, null, 'wf-test', $3, $4, interval '5 minutes')`,
		ids, leases, types, take)
	require.NoError(t, err)
	out := map[int64]string{}
	var taken []int64
	var id int64
	var status string
	_, err = pgx.ForEachRow(rows, []any{&id, &status}, func() error {
		if status == "taken" {
			taken = append(taken, id)
		} else {
			out[id] = status
		}
		return nil
	})
	require.NoError(t, err)
	return out, taken
}

// A completion that may take children leases those it releases to its worker in the same
// statement, as a claim would lease them: running, attempt 1, a lease row whose id fences the
// child's completion, read back by queues.leased_tasks; the rest of its children are made
// pending as before. Only a child no limit governs, of the worker's types, due, of no paused
// queue and of a priority no lower than any unlimited pending task's is taken, and no more than
// asked for.
func TestWorkflowChildrenTakenByTheirWorker(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)

	run := func(typ string) (id, lease int64) {
		id = scalar[int64](t, pool, `select queues.enqueue($1, '{}')`, typ)
		return id, claimOne(t, pool, typ, id)
	}

	// Taken: leased to the worker, in the completion's transaction.
	p, pl := run("tk.parent")
	kid := enqueueAfter(t, pool, "tk.kid", "cancel", p)
	out, taken := completeTaking(t, pool, []int64{p}, []int64{pl}, []string{"tk.parent", "tk.kid"}, 5)
	require.Equal(t, map[int64]string{p: "completed"}, out)
	require.Equal(t, []int64{kid}, taken)
	var status, worker string
	var attempt int
	var lease int64
	require.NoError(t, pool.QueryRow(t.Context(), `select status::text, worker_id, attempt, lease_id from queues.task where task_id = $1`, kid).
		Scan(&status, &worker, &attempt, &lease))
	require.Equal(t, "running", status)
	require.Equal(t, "wf-test", worker)
	require.Equal(t, 1, attempt)
	require.True(t, scalar[bool](t, pool, `select exists (select from queues.task_lease l where l.task_lease_id = $1 and l.task_id = $2
		and l.worker_id = 'wf-test' and l.attempt = 1)`, lease, kid), "the child's lease row")
	require.True(t, scalar[bool](t, pool, `select l.xmin = p.xmin from queues.task_lease l, queues.task p
		where l.task_lease_id = $1 and p.task_id = $2`, lease, p), "leased in the parent's completion's transaction")
	require.Equal(t, []int64{kid}, scalar[[]int64](t, pool, `select array_agg(task_id) from queues.leased_tasks('wf-test', $1)`, []int64{kid, p}))
	require.Empty(t, scalar[[]int64](t, pool, `select coalesce(array_agg(task_id), '{}') from queues.leased_tasks('other', $1)`, []int64{kid}))
	require.Empty(t, completeUnder(t, pool, []int64{kid}, []int64{lease + 1000}), "fenced by its lease")
	require.Equal(t, map[int64]string{kid: "completed"}, completeUnder(t, pool, []int64{kid}, []int64{lease}))

	// At most _take of them; the others are pending.
	p, pl = run("tk.parent")
	kids := []int64{enqueueAfter(t, pool, "tk.kid", "cancel", p), enqueueAfter(t, pool, "tk.kid", "cancel", p), enqueueAfter(t, pool, "tk.kid", "cancel", p)}
	_, taken = completeTaking(t, pool, []int64{p}, []int64{pl}, nil, 2)
	require.Equal(t, kids[:2], taken)
	require.Equal(t, "pending", statusOf(t, pool, kids[2]))
	leases := scalar[[]int64](t, pool, `select array_agg(lease_id order by task_id) from queues.task where task_id = any ($1)`, kids[:2])
	mustExec(t, pool, `select queues.release_tasks($1, $2)`, kids[:2], leases)

	// Not taken, left pending: a limited child, one of another type, one scheduled later, one
	// of a paused queue, one of a lower priority than a pending task; none with _take 0.
	mustExec(t, pool, `select queues.set_limit('tk.limited', _max_running => 5)`)
	mustExec(t, pool, `select queues.pause_queue('tk.paused')`)
	cases := []struct {
		name, sql string
		types     []string
		take      int
	}{
		{"limited", `select queues.enqueue('tk.limited', '{}', _after => array[$1::bigint])`, nil, 5},
		{"another type", `select queues.enqueue('tk.other', '{}', _after => array[$1::bigint])`, []string{"tk.parent", "tk.kid"}, 5},
		{"scheduled later", `select queues.enqueue('tk.kid', '{}', _after => array[$1::bigint], _scheduled_at => now() + interval '1 hour')`, nil, 5},
		{"paused", `select queues.enqueue('tk.paused', '{}', _after => array[$1::bigint])`, nil, 5},
		{"lower priority", `select queues.enqueue('tk.kid', '{}', _after => array[$1::bigint], _priority => -1)`, nil, 5},
		{"take 0", `select queues.enqueue('tk.kid', '{}', _after => array[$1::bigint])`, nil, 0},
	}
	blocker := scalar[int64](t, pool, `select queues.enqueue('tk.blocker', '{}')`) // pending, priority 0
	for _, c := range cases {
		p, pl := run("tk.parent")
		kid := scalar[int64](t, pool, c.sql, p)
		out, taken := completeTaking(t, pool, []int64{p}, []int64{pl}, c.types, c.take)
		require.Equal(t, map[int64]string{p: "completed"}, out, c.name)
		require.Empty(t, taken, c.name)
		require.Equal(t, "pending", statusOf(t, pool, kid), c.name)
	}
	mustExec(t, pool, `select queues.cancel_task($1)`, blocker)

	// A stale completion releases nothing, and so takes nothing.
	p, pl = run("tk.parent")
	kid = enqueueAfter(t, pool, "tk.kid", "cancel", p)
	out, taken = completeTaking(t, pool, []int64{p}, []int64{pl + 1000}, nil, 5)
	require.Empty(t, out)
	require.Empty(t, taken)
	require.Equal(t, "waiting", statusOf(t, pool, kid))
	require.Equal(t, "running", statusOf(t, pool, p))
}

// Bad input to the taking completion is refused with 22023 and writes nothing; an application
// role may call neither it nor queues.leased_tasks.
func TestWorkflowTakeBadInputAndRoles(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, pool := newClient(t)
	p := scalar[int64](t, pool, `select queues.enqueue('tk.parent', '{}')`)
	pl := claimOne(t, pool, "tk.parent", p)
	kid := enqueueAfter(t, pool, "tk.kid", "cancel", p)
	for _, sql := range []string{
		`select * from queues.complete_tasks_and_take($1, $2, null, 'w', null, -1, interval '1 minute')`,
		`select * from queues.complete_tasks_and_take($1, $2, null, 'w', null, 10001, interval '1 minute')`,
		`select * from queues.complete_tasks_and_take($1, $2, null, 'w', null, null, interval '1 minute')`,
		`select * from queues.complete_tasks_and_take($1, $2, null, null, null, 1, interval '1 minute')`,
		`select * from queues.complete_tasks_and_take($1, $2, null, ' ', null, 1, interval '1 minute')`,
		`select * from queues.complete_tasks_and_take($1, $2, null, 'w', null, 1, interval '0')`,
		`select * from queues.complete_tasks_and_take($1, $2, null, 'w', null, 1, null)`,
		`select * from queues.complete_tasks_and_take($1, $2 || array[1::bigint], null, 'w', null, 1, interval '1 minute')`,
	} {
		_, err := pool.Exec(ctx, sql, []int64{p}, []int64{pl})
		requireSQLState(t, err, "22023", ".", sql)
	}
	require.Equal(t, "running", statusOf(t, pool, p))
	require.Equal(t, "waiting", statusOf(t, pool, kid))

	app := "app_" + randomHex(t, 6)
	mustExec(t, pool, "create role "+pgx.Identifier{app}.Sanitize()+" nologin")
	t.Cleanup(func() {
		mustExec(t, pool, "drop owned by "+pgx.Identifier{app}.Sanitize()+"; drop role "+pgx.Identifier{app}.Sanitize())
	})
	mustExec(t, pool, `select queues.grant_enqueue($1)`, app)
	for _, sql := range []string{
		`select count(*) from queues.complete_tasks_and_take(array[$1::bigint], array[$2::bigint], null, 'w', null, 5, interval '1 hour')`,
		`select count(*) from queues.leased_tasks('wf-test', array[$1::bigint, $2::bigint])`,
	} {
		var n any
		err := asRoleScalar(t, pool, app, sql, &n, p, pl)
		requireSQLState(t, err, "42501", "permission denied", sql)
	}
	require.Equal(t, "running", statusOf(t, pool, p))
	require.Equal(t, "waiting", statusOf(t, pool, kid))
	for _, fn := range []string{"queues.complete_tasks_and_take(bigint[], bigint[], jsonb[], text, text[], integer, interval)",
		"queues.leased_tasks(text, bigint[])"} {
		require.True(t, scalar[bool](t, pool, `select has_function_privilege('worker_service_user', $1, 'execute')`, fn), fn)
	}
}

// A worker runs the children its completions take as it runs claimed tasks, each once: a chain
// of two on an idle worker has its second link leased in the first's completion (the lease
// row written in the same transaction as the parent's completion), and 30 diamonds beside it
// all complete with one attempt each, every node run once.
func TestWorkflowWorkerRunsTakenChildrenOnce(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	var mu sync.Mutex
	runs := map[int64]int{}
	hs := taskorch.NewHandlers()
	hs.HandleFunc("tk.node", func(_ context.Context, task *taskorch.Task) error {
		mu.Lock()
		defer mu.Unlock()
		runs[task.ID]++
		return nil
	})
	w, _ := startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Concurrency: 4})

	first := scalar[int64](t, pool, `select queues.enqueue('tk.node', '{}')`)
	second := enqueueAfter(t, pool, "tk.node", "cancel", first)
	waitStatus(t, pool, second, taskorch.StatusCompleted)
	require.True(t, scalar[bool](t, pool, `select l.xmin = p.xmin and l.worker_id = $3 from queues.task_lease l, queues.task p
		where l.task_id = $1 and p.task_id = $2`, second, first, w.ID()), "the second link was leased in the first's completion")

	var last []int64
	for range 30 {
		root := scalar[int64](t, pool, `select queues.enqueue('tk.node', '{}')`)
		b := enqueueAfter(t, pool, "tk.node", "cancel", root)
		c := enqueueAfter(t, pool, "tk.node", "cancel", root)
		last = append(last, enqueueAfter(t, pool, "tk.node", "cancel", b, c))
	}
	for _, id := range last {
		waitStatus(t, pool, id, taskorch.StatusCompleted)
	}
	require.Equal(t, 122, scalar[int](t, pool, `select count(*)::int from queues.task where status = 'completed' and attempt = 1`))
	require.Equal(t, 1, scalar[int](t, pool, `select count(distinct worker_id)::int from queues.task_lease`))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, runs, 122)
	for id, n := range runs {
		require.Equal(t, 1, n, "task %d ran %d times", id, n)
	}
}

// A child leased to a worker that does not know it (the answer of the completion that took it
// was lost) is given back when the worker stops, as a claim cut short is: pending again, its
// attempt not spent.
func TestWorkflowTakenChildUnknownToItsWorkerGivenBack(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	w, stop := startWorker(t, pool, &taskorch.WorkerConfig{Handlers: taskorch.NewHandlers()})
	p := scalar[int64](t, pool, `select queues.enqueue('tk.parent', '{}')`)
	pl := claimOne(t, pool, "tk.parent", p)
	kid := enqueueAfter(t, pool, "tk.kid", "cancel", p)
	rows, err := pool.Query(t.Context(), `select task_id, status from queues.complete_tasks_and_take($1, $2, null, $3, null, 1, interval '1 hour')`,
		[]int64{p}, []int64{pl}, w.ID())
	require.NoError(t, err)
	rows.Close()
	require.Equal(t, "running", statusOf(t, pool, kid))
	stop()
	require.Equal(t, "pending", statusOf(t, pool, kid))
	require.Equal(t, 0, scalar[int](t, pool, `select attempt from queues.task where task_id = $1`, kid))
}
