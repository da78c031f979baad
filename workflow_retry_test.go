package taskorch_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// Retrying a failed parent by hand makes the children its failure cancelled wait again (each with
// a retried event naming it), the grandchildren too; they run once, in order, after it completes.
// A child cancelled by an operator is left cancelled.
func TestWorkflowRetryFailedParent(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	a := scalar[int64](t, pool, `select queues.enqueue('wf.a', '{}')`)
	b := enqueueAfter(t, pool, "wf.b", "cancel", a)
	c := enqueueAfter(t, pool, "wf.c", "cancel", a)
	d := enqueueAfter(t, pool, "wf.d", "cancel", b, c)
	byHand := enqueueAfter(t, pool, "wf.x", "cancel", a)
	require.Equal(t, "cancelled", scalar[string](t, pool, `select queues.cancel_task($1, 'not needed')::text`, byHand))

	require.Equal(t, "failed", scalar[string](t, pool, `select queues.fail_task($1, 'broken', $2, false)::text`, a, claimOne(t, pool, "wf.a", a)))
	for _, id := range []int64{b, c, d} {
		require.Equal(t, "cancelled", statusOf(t, pool, id))
	}

	late := enqueueAfter(t, pool, "wf.late", "cancel", a)
	require.Equal(t, "cancelled", statusOf(t, pool, late))

	require.Equal(t, "pending", scalar[string](t, pool, `select queues.retry_task($1)::text`, a))
	for _, id := range []int64{b, c, d} {
		require.Equal(t, "waiting", statusOf(t, pool, id), "task %d", id)
	}
	require.Equal(t, "cancelled", statusOf(t, pool, byHand))
	require.Equal(t, "waiting", statusOf(t, pool, late), "a child enqueued after the parent had failed waits again too")
	require.Equal(t, fmt.Sprintf("waits again: parent task %d was retried by hand", a),
		scalar[string](t, pool, `select detail from queues.task_event where task_id = $1 and event = 'retried'`, b))
	require.Equal(t, fmt.Sprintf("waits again: parent task %d was retried by hand", b),
		scalar[string](t, pool, `select detail from queues.task_event where task_id = $1 and event = 'retried'`, d))
	require.Equal(t, []int64{a, a, a, b, c}, scalar[[]int64](t, pool, `select array_agg(parent_id order by parent_id, child_id) from queues.task_edge`))

	// Nothing but the retried parent can be claimed; then each runs once, in order.
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.claim_tasks('w', 10, interval '1 minute', array['wf.b','wf.c','wf.d','wf.x','wf.late'])`))
	completeUnder(t, pool, []int64{a}, []int64{claimOne(t, pool, "wf.a", a)})
	require.Equal(t, "pending", statusOf(t, pool, late))
	require.Equal(t, "pending", statusOf(t, pool, b))
	require.Equal(t, "pending", statusOf(t, pool, c))
	require.Equal(t, "waiting", statusOf(t, pool, d))
	completeUnder(t, pool, []int64{b, c}, []int64{claimOne(t, pool, "wf.b", b), claimOne(t, pool, "wf.c", c)})
	require.Equal(t, map[int64]string{d: "completed"}, completeUnder(t, pool, []int64{d}, []int64{claimOne(t, pool, "wf.d", d)}))
	for _, id := range []int64{b, c, d} {
		require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.task_lease where task_id = $1`, id), "task %d ran once", id)
	}
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_edge`))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_wait_stripe`),
		"no counter is left: d's stripe went with its release, and a task of one parent (the one cancelled by hand) has none but its edge")
}

// In a chain a → b → c where a completed and b failed, retrying b runs it at once (its parent
// completed) and makes c wait for it again; the same through retry_tasks and retry_tasks_matching.
func TestWorkflowRetryMiddleOfChain(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	for _, how := range []string{
		`select r::text from queues.retry_task($1) r`,
		`select status::text from queues.retry_tasks(array[$1]::bigint[]) where outcome = 'done'`,
		`select 'pending' from queues.retry_tasks_matching(_statuses => '{failed}', _task_types => array['wf.b'], _after_task_id => $1 - 1) where done = 1`,
	} {
		a := scalar[int64](t, pool, `select queues.enqueue('wf.a', '{}')`)
		b := enqueueAfter(t, pool, "wf.b", "cancel", a)
		c := enqueueAfter(t, pool, "wf.c", "cancel", b)
		completeUnder(t, pool, []int64{a}, []int64{claimOne(t, pool, "wf.a", a)})
		require.Equal(t, "failed", scalar[string](t, pool, `select queues.fail_task($1, 'broken', $2, false)::text`, b, claimOne(t, pool, "wf.b", b)))
		require.Equal(t, "cancelled", statusOf(t, pool, c))

		require.Equal(t, "pending", scalar[string](t, pool, how, b), how)
		require.Equal(t, "pending", statusOf(t, pool, b))
		require.Equal(t, "waiting", statusOf(t, pool, c), how)
		completeUnder(t, pool, []int64{b}, []int64{claimOne(t, pool, "wf.b", b)})
		require.Equal(t, map[int64]string{c: "completed"}, completeUnder(t, pool, []int64{c}, []int64{claimOne(t, pool, "wf.c", c)}))
	}
}

// Retrying a cancelled child by hand while a parent still runs makes it wait for that parent
// (the failed one counts as ended: the operator chose to run it); a waiting task cannot be retried.
func TestWorkflowRetryCancelledChildWaits(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	p1 := scalar[int64](t, pool, `select queues.enqueue('wf.p', '{}')`)
	p2 := scalar[int64](t, pool, `select queues.enqueue('wf.p', '{}')`)
	c := enqueueAfter(t, pool, "wf.c", "cancel", p1, p2)
	g := enqueueAfter(t, pool, "wf.g", "cancel", c)
	require.Equal(t, "cancelled", scalar[string](t, pool, `select queues.cancel_task($1)::text`, p1))
	require.Equal(t, "cancelled", statusOf(t, pool, c))
	lease2 := claimOne(t, pool, "wf.p", p2)

	_, err := pool.Exec(context.Background(), `select queues.retry_task($1)`, g)
	require.NoError(t, err, "a cancelled grandchild whose parent is cancelled is retried: it runs")
	require.Equal(t, "pending", statusOf(t, pool, g))
	mustExec(t, pool, `select queues.cancel_task($1)`, g)

	require.Equal(t, "waiting", scalar[string](t, pool, `select queues.retry_task($1)::text`, c))
	require.Equal(t, "waits for 1 parent(s) that have not ended",
		scalar[string](t, pool, `select detail from queues.task_event where task_id = $1 and event = 'waiting'`, c))
	require.Equal(t, "cancelled", statusOf(t, pool, g), "cancelled by an operator, not by the cascade")
	_, err = pool.Exec(context.Background(), `select queues.retry_task($1)`, c)
	require.ErrorContains(t, err, fmt.Sprintf("task %d is waiting for its parents", c))
	require.Equal(t, "waiting", statusOf(t, pool, c))
	require.Equal(t, []string{"wrong_state", "not_found"},
		scalar[[]string](t, pool, `select array_agg(outcome order by task_id) from queues.retry_tasks(array[$1, $2]::bigint[])`, c, int64(1)<<60))

	completeUnder(t, pool, []int64{p2}, []int64{lease2})
	require.Equal(t, "pending", statusOf(t, pool, c))
	require.Equal(t, map[int64]string{c: "completed"}, completeUnder(t, pool, []int64{c}, []int64{claimOne(t, pool, "wf.c", c)}))
}

// Under 'run' a child counted its parent's failure and is not held back by the parent's retry:
// it runs once; a 'cancel' sibling waits again for the retried parent; a 'cancel' child of the
// 'run' child is not touched.
func TestWorkflowRetryRunPolicy(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	p := scalar[int64](t, pool, `select queues.enqueue('wf.p', '{}')`)
	run := enqueueAfter(t, pool, "wf.run", "run", p)
	cancel := enqueueAfter(t, pool, "wf.cancel", "cancel", p)
	afterRun := enqueueAfter(t, pool, "wf.after", "cancel", run)
	require.Equal(t, "failed", scalar[string](t, pool, `select queues.fail_task($1, 'broken', $2, false)::text`, p, claimOne(t, pool, "wf.p", p)))
	require.Equal(t, "pending", statusOf(t, pool, run))
	require.Equal(t, "cancelled", statusOf(t, pool, cancel))

	require.Equal(t, "pending", scalar[string](t, pool, `select queues.retry_task($1)::text`, p))
	require.Equal(t, "pending", statusOf(t, pool, run))
	require.Equal(t, "waiting", statusOf(t, pool, cancel))
	require.Equal(t, "waiting", statusOf(t, pool, afterRun))
	// Made due now by hand while pending, the run child still does not wait for the retried parent.
	require.Equal(t, "done", scalar[string](t, pool, `select outcome from queues.retry_tasks(array[$1]::bigint[])`, run))
	require.Equal(t, "pending", scalar[string](t, pool, `select queues.retry_task($1)::text`, run))
	require.Equal(t, "pending", statusOf(t, pool, run))
	completeUnder(t, pool, []int64{run, p}, []int64{claimOne(t, pool, "wf.run", run), claimOne(t, pool, "wf.p", p)})
	require.Equal(t, "pending", statusOf(t, pool, cancel))
	require.Equal(t, "pending", statusOf(t, pool, afterRun))
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.task_lease where task_id = $1`, run), "ran once")
}

// A retry of a failed parent and the completion of the child's other parent, in two sessions at
// once, many times over: neither deadlocks, and the child is released exactly once, after both
// parents completed, whatever the order.
func TestWorkflowRetryConcurrentWithCompletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := newClient(t)
	const rounds = 40
	type round struct{ p, q, lease, c, g int64 }
	rs := make([]round, rounds)
	for i := range rs {
		p := scalar[int64](t, pool, `select queues.enqueue('wf.p', '{}')`)
		q := scalar[int64](t, pool, `select queues.enqueue('wf.q', '{}')`)
		c := enqueueAfter(t, pool, "wf.c", "cancel", p, q)
		g := enqueueAfter(t, pool, "wf.g", "cancel", c, q)
		require.Equal(t, "failed", scalar[string](t, pool, `select queues.fail_task($1, 'broken', $2, false)::text`, p, claimOne(t, pool, "wf.p", p)))
		require.Equal(t, "cancelled", statusOf(t, pool, c))
		rs[i] = round{p: p, q: q, lease: claimOne(t, pool, "wf.q", q), c: c, g: g}
	}
	for _, r := range rs {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, errs[0] = pool.Exec(ctx, `select queues.retry_task($1)`, r.p)
		}()
		go func() {
			defer wg.Done()
			<-start
			_, errs[1] = pool.Exec(ctx, `select queues.complete_tasks_with_results(array[$1]::bigint[], array[$2]::bigint[], null)`, r.q, r.lease)
		}()
		close(start)
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		require.Equal(t, "completed", statusOf(t, pool, r.q))
		require.Equal(t, "waiting", statusOf(t, pool, r.c), "task %d waits for its retried parent only", r.c)
		require.Equal(t, "waiting", statusOf(t, pool, r.g))
		require.Equal(t, []int64{r.p}, scalar[[]int64](t, pool, `select array_agg(parent_id) from queues.task_edge where child_id = $1`, r.c))
		completeUnder(t, pool, []int64{r.p}, []int64{claimOne(t, pool, "wf.p", r.p)})
		require.Equal(t, "pending", statusOf(t, pool, r.c))
		completeUnder(t, pool, []int64{r.c}, []int64{claimOne(t, pool, "wf.c", r.c)})
		require.Equal(t, "pending", statusOf(t, pool, r.g))
	}
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_edge`))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_wait_stripe`))
	require.Zero(t, scalar[int](t, pool, `select count(*) from (select l.task_id from queues.task_lease l join queues.task t using (task_id)
		where t.task_type in ('wf.c', 'wf.g') group by l.task_id having count(*) > 1) twice`))
}

// The functions that make retried tasks wait again are the retry functions' own: neither an
// application role nor the worker's may call them.
func TestWorkflowRetryFunctionsNotGranted(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	for _, fn := range []string{"internal.rewait_after_retry(bigint[], text)", "internal.rewait_task(bigint, bigint, text)"} {
		require.False(t, scalar[bool](t, pool, `select has_function_privilege('public', $1, 'execute')`, fn), fn)
		require.False(t, scalar[bool](t, pool, `select has_function_privilege('worker_service_user', $1, 'execute')`, fn), fn)
		require.True(t, scalar[bool](t, pool, `select p.prosecdef from pg_proc p where p.oid = $1::regprocedure`, fn), fn)
	}
}

// A join cancelled by two parents that failed on their own waits again only once both are
// retried: the first retry leaves it cancelled (its other parent is still failed), the second,
// though the join's cancellation named the first, restores it; it runs once after both complete.
func TestWorkflowRetryJoinOfTwoFailedParents(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	b := scalar[int64](t, pool, `select queues.enqueue('wf.b', '{}')`)
	c := scalar[int64](t, pool, `select queues.enqueue('wf.c', '{}')`)
	d := enqueueAfter(t, pool, "wf.d", "cancel", b, c)
	require.Equal(t, "failed", scalar[string](t, pool, `select queues.fail_task($1, 'broken', $2, false)::text`, b, claimOne(t, pool, "wf.b", b)))
	require.Equal(t, "failed", scalar[string](t, pool, `select queues.fail_task($1, 'broken', $2, false)::text`, c, claimOne(t, pool, "wf.c", c)))
	require.Equal(t, fmt.Sprintf("parent task %d ended failed", b), cancelReason(t, pool, d))

	require.Equal(t, "pending", scalar[string](t, pool, `select queues.retry_task($1)::text`, b))
	require.Equal(t, "cancelled", statusOf(t, pool, d), "its other parent is still failed")
	require.Equal(t, "done", scalar[string](t, pool, `select outcome from queues.retry_tasks(array[$1]::bigint[])`, c))
	require.Equal(t, "waiting", statusOf(t, pool, d))
	require.Equal(t, fmt.Sprintf("waits again: parent task %d was retried by hand", c),
		scalar[string](t, pool, `select detail from queues.task_event where task_id = $1 and event = 'retried'`, d))
	completeUnder(t, pool, []int64{b}, []int64{claimOne(t, pool, "wf.b", b)})
	require.Equal(t, "waiting", statusOf(t, pool, d))
	completeUnder(t, pool, []int64{c}, []int64{claimOne(t, pool, "wf.c", c)})
	require.Equal(t, map[int64]string{d: "completed"}, completeUnder(t, pool, []int64{d}, []int64{claimOne(t, pool, "wf.d", d)}))
}

// Two parents of one cancelled join retried by hand in two sessions at once: each retry either
// commits or is refused whole with a deadlock error (40P01) and, run again, commits; in the end
// the join waits for both and runs once.
func TestWorkflowRetryTwoParentsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := newClient(t)
	for range 8 {
		b := scalar[int64](t, pool, `select queues.enqueue('wf.b', '{}')`)
		c := scalar[int64](t, pool, `select queues.enqueue('wf.c', '{}')`)
		d := enqueueAfter(t, pool, "wf.d", "cancel", b, c)
		require.Equal(t, "failed", scalar[string](t, pool, `select queues.fail_task($1, 'broken', $2, false)::text`, b, claimOne(t, pool, "wf.b", b)))
		require.Equal(t, "failed", scalar[string](t, pool, `select queues.fail_task($1, 'broken', $2, false)::text`, c, claimOne(t, pool, "wf.c", c)))

		errs := make([]error, 2)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, id := range []int64{b, c} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = pool.Exec(ctx, `select queues.retry_task($1)`, id)
			}()
		}
		close(start)
		wg.Wait()
		for i, id := range []int64{b, c} {
			if errs[i] != nil {
				var pgErr *pgconn.PgError
				require.ErrorAs(t, errs[i], &pgErr)
				require.Equal(t, "40P01", pgErr.Code, "only a deadlock may refuse a retry")
				require.Equal(t, "failed", statusOf(t, pool, id), "the refused retry wrote nothing")
				mustExec(t, pool, `select queues.retry_task($1)`, id)
			}
		}
		require.Equal(t, "waiting", statusOf(t, pool, d))
		completeUnder(t, pool, []int64{b, c}, []int64{claimOne(t, pool, "wf.b", b), claimOne(t, pool, "wf.c", c)})
		require.Equal(t, map[int64]string{d: "completed"}, completeUnder(t, pool, []int64{d}, []int64{claimOne(t, pool, "wf.d", d)}))
	}
}
