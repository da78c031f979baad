package maintenance

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// Two workers: one leader at a time, the same one in IsLeader and in the database, and no
// flapping while both run.
func TestOneLeaderAtATime(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ev := newEvents()
	a := start(t, pool, testConfig("w-a", ev))
	b := start(t, pool, testConfig("w-b", ev))
	who, elected := ev.wait(t, "elected", kind(EventElected))

	from := 0
	for range 40 { // once per heartbeat of either worker: about 1 second, several renewals
		ev.waitFrom(t, &from, "heartbeat", kind(EventHeartbeat))
		aLeads, bLeads := a.IsLeader(), b.IsLeader()
		require.False(t, aLeads && bLeads, "two leaders")
		var dbLeader string
		var term int64
		require.NoError(t, pool.QueryRow(t.Context(),
			`select worker_id, term from queues.leader where expires_at > now()`).Scan(&dbLeader, &term))
		require.Equal(t, who, dbLeader)
		require.Equal(t, elected.Term, term)
		if aLeads {
			require.Equal(t, "w-a", dbLeader)
		}
		if bLeads {
			require.Equal(t, "w-b", dbLeader)
		}
	}
	require.Equal(t, 1, ev.count(kind(EventElected)), "one election, no flapping")
	require.Zero(t, ev.count(kind(EventDeposed)))
}

// Stopping the leader resigns its lease, so another takes over at its next attempt (about
// LeaderTTL/3 later) instead of when the lease would have expired, with the next term.
func TestLeaderHandsOverOnStop(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ev := newEvents()
	ms := map[string]*running{
		"w-a": start(t, pool, testConfig("w-a", ev)),
		"w-b": start(t, pool, testConfig("w-b", ev)),
	}
	from := 0
	first, elected := ev.waitFrom(t, &from, "elected", kind(EventElected))
	other := map[string]string{"w-a": "w-b", "w-b": "w-a"}[first]

	ms[first].stop(t)
	// Stop has returned: the lease is released (or already the other's), not left to expire.
	// Timed from here, not from before stop: Run's shutdown under a loaded CI machine is not
	// what this test measures.
	stopped := time.Now()
	require.True(t, scalar[bool](t, pool,
		`select worker_id is distinct from $1 and (worker_id is not null or expires_at <= now()) from queues.leader`, first),
		"the stopped leader's lease is released at once")
	_, next := ev.waitFrom(t, &from, "elected after stop", kindOf(other, EventElected))
	took := time.Since(stopped)
	require.Less(t, took, ms[other].cfg.LeaderTTL, "handover took %s after the leader resigned", took)
	require.Equal(t, elected.Term+1, next.Term)
	require.True(t, ms[other].IsLeader())
	require.Equal(t, other, scalar[string](t, pool, `select worker_id from queues.leader`))
}

// A leader that cannot renew (its calls block on a lock) stops acting when its lease runs out;
// once another has taken over, the database refuses its stale term: reap, prune and schedule
// ticks under it do nothing. The same holds for a lease that merely expired.
func TestDeposedLeaderCannotAct(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 10}) // the blocked leader holds some
	ev := newEvents()
	a := start(t, pool, testConfig("w-a", ev))
	_, elected := ev.wait(t, "elected", kind(EventElected))
	oldTerm := elected.Term

	// Work a leader would do: a dead worker with a running task, an old finished task, a due
	// schedule tick. (Set up while the leader acts would race with it, so under a lock.)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	_, err = tx.Exec(ctx, `select * from queues.leader for update`) // blocks renewals and leader actions
	require.NoError(t, err)
	from := 0
	ev.waitFrom(t, &from, "deposed", kindOf("w-a", EventDeposed))
	require.False(t, a.IsLeader())
	require.Zero(t, a.Term())

	mustExec(t, pool, `select queues.register_worker('ghost', 'h')`)
	mustExec(t, pool, `update queues.worker set last_heartbeat = now() - interval '1 hour' where worker_id = 'ghost'`)
	mustExec(t, pool, `select queues.enqueue('g', '{}')`)
	mustExec(t, pool, `select queues.claim_tasks('ghost', 1)`)
	oldDone := scalar[int64](t, pool, `select queues.enqueue('done', '{}')`)
	mustExec(t, pool, `update queues.task set status = 'completed', completed_at = now() - interval '30 days' where task_id = $1`, oldDone)
	mustExec(t, pool, `select queues.add_schedule('s', '* * * * *', 'tick', _next_run_at => now() - interval '1 minute')`)

	// Another worker takes over with the next term; the old leader's lock is released.
	mustExec(t, pool, `select queues.register_worker('usurper', 'h')`)
	_, err = tx.Exec(ctx, `update queues.leader set worker_id = 'usurper', term = term + 1, expires_at = now() + interval '1 hour'`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	// A keeps trying and is refused: the usurper's lease has not expired.
	n := ev.count(kind(EventHeartbeat))
	require.Eventually(t, func() bool { return ev.count(kind(EventHeartbeat)) > n+3 }, waitTimeout, 5*time.Millisecond)
	require.False(t, a.IsLeader())
	require.Equal(t, 1, ev.count(kind(EventElected)))

	// The stale term does nothing, whoever uses it.
	checkRefused := func(term int64) {
		t.Helper()
		reaped, err := ReapDeadWorkers(ctx, pool, time.Second, term)
		require.NoError(t, err)
		require.Empty(t, reaped)
		n, ok, err := PruneFinished(ctx, pool, time.Hour, 100, term)
		require.NoError(t, err)
		require.False(t, ok)
		require.Zero(t, n)
		require.Nil(t, scalar[*int64](t, pool,
			`select queues.enqueue_schedule_tick('s', '* * * * *', date_trunc('minute', now()), now() + interval '1 minute', $1)`, term))
		require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.worker where worker_id = 'ghost'`))
		require.Equal(t, "running", scalar[string](t, pool, `select status::text from queues.task where task_type = 'g'`))
		require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.task where task_id = $1`, oldDone))
		require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task where task_type = 'tick'`))
	}
	checkRefused(oldTerm)
	a.stop(t) // or it would take the lease once it expires, below

	// The current term, once its lease has expired, is refused as well.
	mustExec(t, pool, `update queues.leader set expires_at = now() - interval '1 second'`)
	checkRefused(oldTerm + 1)
}

// acquire_leadership under concurrent callers: exactly one wins each expired lease, the term
// grows by one per change of leader, and a renewal keeps the term.
func TestAcquireLeadershipConcurrent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 10})
	const callers = 8
	for i := range callers {
		mustExec(t, pool, `select queues.register_worker($1, 'h')`, fmt.Sprintf("c%d", i))
	}
	mustExec(t, pool, `select queues.register_worker('someone-else', 'h')`)
	var lastTerm int64
	for round := range 20 {
		mustExec(t, pool, `update queues.leader set expires_at = now() - interval '1 second'`)
		var wg sync.WaitGroup
		terms := make([]*int64, callers)
		errs := make([]error, callers)
		for i := range callers {
			wg.Go(func() {
				id := fmt.Sprintf("c%d", (i+round)%callers) // the last round's winner is among them
				errs[i] = pool.QueryRow(ctx, `select queues.acquire_leadership($1, interval '1 hour')`, id).Scan(&terms[i])
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		var won []int64
		for _, term := range terms {
			if term != nil {
				won = append(won, *term)
			}
		}
		require.Len(t, won, 1, "round %d: one winner", round)
		leader := scalar[string](t, pool, `select worker_id from queues.leader`)
		// The term grows unless the previous leader renewed its own expired lease.
		require.Contains(t, []int64{lastTerm, lastTerm + 1}, won[0])
		lastTerm = won[0]

		var renewed *int64
		require.NoError(t, pool.QueryRow(ctx, `select queues.acquire_leadership($1, interval '1 hour')`, leader).Scan(&renewed))
		require.Equal(t, lastTerm, *renewed, "a renewal keeps the term")
		var other *int64
		require.NoError(t, pool.QueryRow(ctx, `select queues.acquire_leadership('someone-else', interval '1 hour')`).Scan(&other))
		require.Nil(t, other, "an unexpired lease is not taken")
	}
	// Resigning lets another in at once, with the next term.
	leader := scalar[string](t, pool, `select worker_id from queues.leader`)
	require.True(t, scalar[bool](t, pool, `select queues.resign_leadership($1)`, leader))
	require.False(t, scalar[bool](t, pool, `select queues.resign_leadership($1)`, leader))
	require.Equal(t, lastTerm+1, scalar[int64](t, pool, `select queues.acquire_leadership('someone-else', interval '1 hour')`))
}

// Intervals shorter than a call on a new connection still work: a call is not abandoned before
// it has had time to finish, so the worker registers, heartbeats and is elected. (With each call
// cut off at a 10 ms interval, every call was abandoned, each on a new connection whose first
// call is the slowest, and the worker never registered.)
func TestIntervalsShorterThanACall(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ev := newEvents()
	cfg := testConfig("w", ev)
	cfg.HeartbeatInterval = 2 * time.Millisecond
	cfg.LeaderTTL = 300 * time.Millisecond
	cfg.PruneInterval = 2 * time.Millisecond
	cfg.ScheduleInterval = 2 * time.Millisecond
	start(t, pool, cfg)
	from := 0
	ev.waitFrom(t, &from, "registered", kind(EventRegistered))
	ev.waitFrom(t, &from, "elected", kind(EventElected))
	for range 3 {
		ev.waitFrom(t, &from, "heartbeat", kind(EventHeartbeat))
	}
}
