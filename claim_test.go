package taskorch_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// Eight claimers racing over 20,000 tasks: every task is claimed exactly once while its lease
// is live, and every claim leaves one task_lease row (and no task_event row).
func TestClaimConcurrentExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 10})
	const total, claimers = 20000, 8
	mustExec(t, pool, `select queues.enqueue_many(array_fill('noop'::text, array[$1::int]), array_fill('{}'::jsonb, array[$1::int]))`, total)

	var mu sync.Mutex
	seen := make(map[int64]int, total)
	g, gctx := errgroup.WithContext(ctx)
	for w := range claimers {
		worker := fmt.Sprintf("w%d", w)
		g.Go(func() error {
			for {
				rows, err := pool.Query(gctx, `select task_id from queues.claim_tasks($1, 50)`, worker)
				if err != nil {
					return err
				}
				var ids []int64
				for rows.Next() {
					var id int64
					if err := rows.Scan(&id); err != nil {
						return err
					}
					ids = append(ids, id)
				}
				if err := rows.Err(); err != nil {
					return err
				}
				if len(ids) == 0 {
					return nil
				}
				mu.Lock()
				for _, id := range ids {
					seen[id]++
				}
				mu.Unlock()
			}
		})
	}
	require.NoError(t, g.Wait())

	require.Len(t, seen, total)
	for id, n := range seen {
		require.Equal(t, 1, n, "task %d claimed %d times", id, n)
	}
	require.Equal(t, int64(total), scalar[int64](t, pool, `select count(*) from queues.task_lease`))
	require.Equal(t, int64(total), scalar[int64](t, pool, `select count(distinct task_id) from queues.task_lease`))
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.task_event`), "a claim writes no event: its lease row says it")
	require.Equal(t, int64(total), scalar[int64](t, pool, `select count(*) from queues.task_history where event = 'claimed'`))
	require.Equal(t, int64(total), scalar[int64](t, pool, `select count(*) from queues.task where status = 'running' and attempt = 1`))
}

// Claim order is priority (higher first), then scheduled time, then id; a task scheduled in the
// future is not claimed before it is due.
func TestClaimOrderAndSchedule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	base := time.Now().Add(-time.Hour)
	enq := func(prio int, at time.Time) int64 {
		res, err := c.Enqueue(ctx, raw("order", `{}`), &taskorch.EnqueueOpts{Priority: new(prio), ScheduledAt: at})
		require.NoError(t, err)
		return res.TaskID
	}
	lowOld := enq(0, base)
	highNew := enq(5, base.Add(2*time.Minute))
	highOld := enq(5, base.Add(time.Minute))
	tieA := enq(1, base)
	tieB := enq(1, base) // same priority and time as tieA: the lower id first
	future := enq(100, time.Now().Add(time.Hour))

	got := claim(t, pool, "w", 10, "5 minutes")
	var ids []int64
	for _, g := range got {
		ids = append(ids, g.TaskID)
	}
	require.Equal(t, []int64{highOld, highNew, tieA, tieB, lowOld}, ids)
	require.Empty(t, claim(t, pool, "w", 10, "5 minutes"), "the future task must not be claimed before it is due")

	task, err := c.Get(ctx, future)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusPending, task.Status)

	// Once due, it is claimed.
	mustExec(t, pool, `update queues.task set run_at = now() - interval '1 second' where task_id = $1`, future)
	got = claim(t, pool, "w", 10, "5 minutes")
	require.Len(t, got, 1)
	require.Equal(t, future, got[0].TaskID)
}

// An expired lease makes the task claimable again, as a new attempt under a new lease; the
// first worker's late completion carries the stale token and is refused and recorded, while the
// new lease's completion is applied.
func TestExpiredLeaseFencing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	res, err := c.Enqueue(ctx, raw("fenced", `{"n":1}`), nil)
	require.NoError(t, err)

	first := claim(t, pool, "slow-worker", 1, "1 millisecond")
	require.Len(t, first, 1)
	require.Equal(t, 1, first[0].Attempt)
	waitLeaseExpired(t, pool, res.TaskID)

	second := claim(t, pool, "fast-worker", 1, "5 minutes")
	require.Len(t, second, 1, "a task whose lease expired must be claimable again")
	require.Equal(t, res.TaskID, second[0].TaskID)
	require.Equal(t, 2, second[0].Attempt, "the expired lease counts as an attempt")
	require.NotEqual(t, first[0].LeaseID, second[0].LeaseID)

	// The stale worker wakes up and tries to finish: refused, recorded, not applied.
	require.False(t, scalar[bool](t, pool, `select queues.complete_task($1, $2)`, res.TaskID, first[0].LeaseID))
	require.Nil(t, scalar[*string](t, pool, `select queues.fail_task($1, 'late failure', $2)::text`, res.TaskID, first[0].LeaseID))
	task, err := c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusRunning, task.Status)
	require.Equal(t, second[0].LeaseID, *task.LeaseID)
	require.Equal(t, int64(2), scalar[int64](t, pool,
		`select count(*) from queues.error where task_id = $1 and error_message like '% refused: lease %'`, res.TaskID))

	require.True(t, scalar[bool](t, pool, `select queues.complete_task($1, $2)`, res.TaskID, second[0].LeaseID))
	require.True(t, scalar[bool](t, pool, `select queues.complete_task($1, $2)`, res.TaskID, second[0].LeaseID),
		"a repeated completion under the same lease is harmless")
	require.False(t, scalar[bool](t, pool, `select queues.complete_task($1, $2)`, res.TaskID, first[0].LeaseID))

	h, err := c.History(ctx, res.TaskID)
	require.NoError(t, err)
	require.Len(t, h.Leases, 2)
	var events []string
	for _, e := range h.Events {
		events = append(events, e.Event)
	}
	require.Equal(t, []string{"claimed", "lease_expired", "claimed", "completed"}, events)
}

// A task whose lease expires on its last attempt is dead, not retried forever.
func TestExpiredLeaseOnLastAttemptIsDead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	res, err := c.Enqueue(ctx, raw("poison", `{}`), &taskorch.EnqueueOpts{MaxAttempts: 1})
	require.NoError(t, err)
	require.Len(t, claim(t, pool, "w", 1, "1 millisecond"), 1)
	waitLeaseExpired(t, pool, res.TaskID)

	require.Equal(t, 1, scalar[int](t, pool, `select queues.rescue_expired_leases()`))
	task, err := c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusDead, task.Status)
	require.NotNil(t, task.DeadAt)
	require.Contains(t, *task.LastError, "expired")
	require.Empty(t, claim(t, pool, "w", 1, "5 minutes"))
}

// Leases are renewed in one statement; a lost lease is missing from the result.
func TestRenewLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	for range 2 {
		_, err := c.Enqueue(ctx, raw("long", `{}`), nil)
		require.NoError(t, err)
	}
	got := claim(t, pool, "w", 2, "1 minute")
	require.Len(t, got, 2)
	_, err := c.Cancel(ctx, got[1].TaskID)
	require.NoError(t, err)

	rows, err := pool.Query(ctx, `select task_id, lease_expires_at from queues.renew_leases($1, $2, interval '1 hour')`,
		[]int64{got[0].TaskID, got[1].TaskID}, []int64{got[0].LeaseID, got[1].LeaseID})
	require.NoError(t, err)
	var renewed []int64
	for rows.Next() {
		var id int64
		var until time.Time
		require.NoError(t, rows.Scan(&id, &until))
		require.WithinDuration(t, time.Now().Add(time.Hour), until, time.Minute)
		renewed = append(renewed, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []int64{got[0].TaskID}, renewed, "the cancelled task's lease is lost")
}

// Batched completion applies what its leases own, counts repeats as done, and refuses the rest.
func TestCompleteTasksBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	_, err := c.EnqueueMany(ctx, []taskorch.EnqueueParams{{Args: raw("b", `{}`)}, {Args: raw("b", `{}`)}, {Args: raw("b", `{}`)}})
	require.NoError(t, err)
	got := claim(t, pool, "w", 3, "5 minutes")
	require.Len(t, got, 3)

	ids := []int64{got[0].TaskID, got[1].TaskID, got[2].TaskID, 999999}
	leases := []int64{got[0].LeaseID, got[1].LeaseID, got[2].LeaseID + 1000, 1}
	done := func() []int64 {
		rows, err := pool.Query(ctx, `select * from queues.complete_tasks($1, $2) order by 1`, ids, leases)
		require.NoError(t, err)
		defer rows.Close()
		var out []int64
		for rows.Next() {
			var id int64
			require.NoError(t, rows.Scan(&id))
			out = append(out, id)
		}
		require.NoError(t, rows.Err())
		return out
	}
	require.Equal(t, []int64{got[0].TaskID, got[1].TaskID}, done())
	require.Equal(t, []int64{got[0].TaskID, got[1].TaskID}, done(), "a repeat is harmless")
	require.Equal(t, int64(2), scalar[int64](t, pool, `select count(*) from queues.task_history where event = 'completed'`))
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.task_event where event = 'completed'`), "a completion writes no event")
	require.Equal(t, int64(4), scalar[int64](t, pool, `select count(*) from queues.error where error_message like 'completion refused%'`),
		"two refusals (wrong lease, unknown task) per call")

	_, err = pool.Exec(ctx, `select queues.complete_tasks(array[1,2], array[1])`)
	require.ErrorContains(t, err, "2 task ids but 1 lease ids")
}

// The short SQL entry points for psql users: dequeue_next_available_task claims one task with a
// 5-minute lease and returns NULL when nothing is due; the one-argument forms act on the current
// lease.
func TestDequeueNextAndOneArgumentForms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	require.Nil(t, scalar[*int64](t, pool, `select task_id from queues.dequeue_next_available_task()`))

	a, err := c.Enqueue(ctx, raw("psql", `{"n":1}`), nil)
	require.NoError(t, err)
	b, err := c.Enqueue(ctx, raw("psql", `{"n":2}`), &taskorch.EnqueueOpts{MaxAttempts: 1})
	require.NoError(t, err)

	var id int64
	var lease time.Duration
	require.NoError(t, pool.QueryRow(ctx, `select task_id, lease_expires_at - claimed_at from queues.dequeue_next_available_task()`).Scan(&id, &lease))
	require.Equal(t, a.TaskID, id)
	require.Equal(t, 5*time.Minute, lease)
	require.True(t, scalar[bool](t, pool, `select queues.complete_task($1)`, a.TaskID))

	require.Equal(t, b.TaskID, scalar[int64](t, pool, `select task_id from queues.dequeue_next_available_task('psql-user', interval '1 minute')`))
	require.Equal(t, "dead", scalar[string](t, pool, `select queues.fail_task($1, 'gave up')::text`, b.TaskID))

	_, err = pool.Exec(ctx, `select queues.complete_task(424242)`)
	require.ErrorContains(t, err, "task 424242 does not exist")
	_, err = pool.Exec(ctx, `select queues.claim_tasks('w', 0)`)
	require.ErrorContains(t, err, "_limit must be at least 1")
	_, err = pool.Exec(ctx, `select queues.claim_tasks('w', 1, interval '-1 second')`)
	require.ErrorContains(t, err, "_lease_duration must be positive")
}

// The claim and completion path keeps its plans (core/0033: planning was a quarter of a small
// claim's server time): the functions carry force_generic_plan, and on one connection the
// cached plans serve claims and completions of one task and of hundreds alike, with expired
// leases rescued by the same cached plan.
func TestClaimPathKeepsItsPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 1})
	for _, fn := range []string{
		`internal.lease_tasks(text, bigint[], interval)`,
		`queues.rescue_expired_leases(integer)`,
		`queues.complete_tasks_with_results(bigint[], bigint[], jsonb[])`,
	} {
		require.Contains(t, scalar[[]string](t, pool, `select proconfig from pg_proc where oid = $1::regprocedure`, fn),
			"plan_cache_mode=force_generic_plan", fn)
	}

	mustExec(t, pool, `select queues.enqueue_many(array_fill('noop'::text, array[$1::int]), array_fill('{}'::jsonb, array[$1::int]))`, 1000)
	claim := func(n int, lease string) (ids, leases []int64) {
		rows, err := pool.Query(ctx, `select task_id, lease_id from queues.claim_tasks('w', $1, $2::interval)`, n, lease)
		require.NoError(t, err)
		for rows.Next() {
			var id, l int64
			require.NoError(t, rows.Scan(&id, &l))
			ids, leases = append(ids, id), append(leases, l)
		}
		require.NoError(t, rows.Err())
		return ids, leases
	}
	complete := func(ids, leases []int64) {
		require.Equal(t, int64(len(ids)), scalar[int64](t, pool,
			`select count(*) from queues.complete_tasks_with_results($1, $2, null) where status = 'completed'`, ids, leases))
	}
	// Past the five calls after which PostgreSQL would otherwise weigh a generic plan.
	for range 8 {
		ids, leases := claim(1, "5 minutes")
		require.Len(t, ids, 1)
		complete(ids, leases)
	}
	ids, leases := claim(400, "5 minutes")
	require.Len(t, ids, 400)
	complete(ids, leases)

	// Leases that expire are rescued by the next claim, through the same cached plans.
	expiring, _ := claim(300, "1 millisecond")
	require.Len(t, expiring, 300)
	require.Eventually(t, func() bool {
		return scalar[bool](t, pool, `select bool_and(lease_expires_at < now()) from queues.task where task_id = any($1)`, expiring)
	}, 5*time.Second, 5*time.Millisecond)
	ids, leases = claim(592, "5 minutes")
	require.Len(t, ids, 592, "the 292 never claimed and the 300 rescued")
	complete(ids, leases)
	require.Equal(t, int64(1000), scalar[int64](t, pool, `select count(*) from queues.task where status = 'completed'`))
	require.Equal(t, int64(300), scalar[int64](t, pool, `select count(*) from queues.task_event where event = 'lease_expired'`))
}
