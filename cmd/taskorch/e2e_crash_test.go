package main

import (
	"fmt"
	"slices"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// Crashed workers (docs/operations.md, "Crashed workers"): real `taskorch worker` processes with
// the default settings (a 5-minute lease, a 30-second worker timeout), SIGKILLed. The tests
// assert how the tasks came back — by the session path, never by a lease's expiry or a
// heartbeat timeout — and that each ran to completion exactly once; they log how long the
// tasks waited, which they do not assert (a loaded machine may take longer; the cause is the
// invariant).

// completionLedger records, with a trigger, every completion applied to a task and the lease
// it was applied under: a completion applied twice leaves two rows.
func completionLedger(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(t.Context(), `
		create table public.completion_ledger (task_id bigint not null, lease_id bigint, at timestamptz not null default clock_timestamp());
		create function public.record_completion() returns trigger language plpgsql as $$
		begin
			insert into public.completion_ledger (task_id, lease_id) values (new.task_id, new.lease_id);
			return null;
		end $$;
		create trigger completion_ledger after update on queues.task for each row
		when (new.status = 'completed' and old.status is distinct from 'completed')
		execute function public.record_completion();`)
	require.NoError(t, err)
}

// requireCompletedOnce checks that every task of ids completed once, under its last lease.
func requireCompletedOnce(t *testing.T, pool *pgxpool.Pool, ids []int64) {
	t.Helper()
	require.Equal(t, len(ids), q[int](t, pool, `select count(*) from queues.task where task_id = any ($1) and status = 'completed'`, ids))
	require.Zero(t, q[int](t, pool, `select count(*) from (select task_id from public.completion_ledger where task_id = any ($1)
		group by task_id having count(*) > 1) twice`, ids), "a task completed twice")
	require.Zero(t, q[int](t, pool, `select count(*) from public.completion_ledger c join queues.task t using (task_id)
		where c.task_id = any ($1) and c.lease_id is distinct from t.lease_id`, ids), "a completion under a stale lease")
}

// releases returns, for the leases worker held on ids, how each ended (the event under it, and
// the cause of a recovery) and when.
type release struct {
	how string
	at  time.Time
}

func releasesOf(t *testing.T, pool *pgxpool.Pool, worker string, ids []int64) []release {
	t.Helper()
	rows, err := pool.Query(t.Context(), `
		select e.event || coalesce(':' || (select x.context->>'cause' from queues.error x
		                                    where x.task_id = e.task_id and (x.context->>'lease_id')::bigint = e.lease_id limit 1), ''),
		       e.occurred_at
		from queues.task_lease l
		join queues.task_event e on e.task_id = l.task_id and e.lease_id = l.task_lease_id
		where l.worker_id = $1 and l.task_id = any ($2)
		order by e.occurred_at`, worker, ids)
	require.NoError(t, err)
	defer rows.Close()
	var out []release
	for rows.Next() {
		var r release
		require.NoError(t, rows.Scan(&r.how, &r.at))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

func durations(ds []time.Duration) string {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return fmt.Sprintf("median %s, max %s, all %v", s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), ds)
}

// A worker holding 10 running tasks is SIGKILLed while another runs, ten times: every time,
// each of its tasks is recovered by the leader because the worker's session is gone (cause
// session_lost), not by a lease's expiry or a heartbeat timeout, runs again on the other worker
// and completes exactly once; nothing is lost.
func TestE2ECrashedWorkerTasksComeBackAtOnce(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	completionLedger(t, pool)
	steady := startWorkerProc(t, url, "TASKORCH_WORKER_ID=steady", "TASKORCH_CONCURRENCY=200")
	waitFor(t, pool, "the steady worker leads", `select exists (select from queues.leader where worker_id = 'steady')`)

	const kills, held = 10, 10
	var all []int64
	var stranded []time.Duration
	for i := range kills {
		victim := fmt.Sprintf("victim-%d", i)
		// The steady worker stays out of the victim's claims: stopped for that moment.
		steady.signal(t, syscall.SIGSTOP)
		p := startWorkerProc(t, url, "TASKORCH_WORKER_ID="+victim, "TASKORCH_CONCURRENCY=10")
		waitFor(t, pool, "the victim registered", `select exists (select from queues.worker where worker_id = $1 and session_key is not null)`, victim)
		var ids []int64
		for range held {
			ids = append(ids, enqueue(t, pool, "taskorch.sleep", `{"ms": 15000}`, 0))
		}
		waitFor(t, pool, "the victim holds them", `select count(*) = $2 from queues.task where worker_id = $1 and status = 'running'`, victim, held)
		steady.signal(t, syscall.SIGCONT)

		killed := time.Now()
		p.signal(t, syscall.SIGKILL)
		p.wait(t)
		waitFor(t, pool, "the victim's tasks back", `select count(*) = 0 from queues.task where worker_id = $1 and status = 'running'`, victim)
		rel := releasesOf(t, pool, victim, ids)
		require.Len(t, rel, held, "kill %d", i)
		var last time.Time
		for _, r := range rel {
			require.Equal(t, "recovered:session_lost", r.how, "kill %d", i)
			last = r.at
		}
		stranded = append(stranded, last.Sub(killed))
		all = append(all, ids...)
		// Before the next victim starts, the steady worker runs them: none is left for it.
		waitFor(t, pool, "the steady worker runs them", `select count(*) = $2 from queues.task where task_id = any ($1)
			and (worker_id = 'steady' or status = 'completed')`, ids, held)
	}
	waitFor(t, pool, "everything completed", `select count(*) = $2 from queues.task where task_id = any ($1) and status = 'completed'`, all, len(all))
	requireCompletedOnce(t, pool, all)
	require.Zero(t, q[int](t, pool, `select count(*) from queues.task_event where event = 'lease_expired'`))
	t.Logf("%d kills of a worker holding %d tasks: stranded from the SIGKILL until the last was back to pending: %s", kills, held, durations(stranded))
}

// The leader is SIGKILLed, three times: the other worker takes the lease before the old one
// expires (the session path: a 15-second lease), and recovers the dead leader's tasks by the
// session path.
func TestE2ELeaderKilledHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	completionLedger(t, pool)
	procs := map[string]*proc{
		"a": startWorkerProc(t, url, "TASKORCH_WORKER_ID=a"),
		"b": startWorkerProc(t, url, "TASKORCH_WORKER_ID=b"),
	}
	var all []int64
	var handovers []time.Duration
	for round := range 3 {
		waitFor(t, pool, "a leader", `select exists (select from queues.leader where worker_id in ('a', 'b') and expires_at > now())`)
		waitFor(t, pool, "both registered", `select count(*) = 2 from queues.worker where session_key is not null`)
		var leader string
		var term int64
		var expires time.Time
		require.NoError(t, pool.QueryRow(t.Context(), `select worker_id, term, expires_at from queues.leader`).Scan(&leader, &term, &expires))
		other := map[string]string{"a": "b", "b": "a"}[leader]
		var ids []int64
		for range 4 {
			ids = append(ids, enqueue(t, pool, "taskorch.sleep", `{"ms": 15000}`, 0))
		}
		waitFor(t, pool, "the tasks running", `select count(*) = 4 from queues.task where task_id = any ($1) and status = 'running'`, ids)
		fromLeader := q[[]int64](t, pool, `select coalesce(array_agg(task_id), '{}') from queues.task where task_id = any ($1) and worker_id = $2`, ids, leader)

		killed := time.Now()
		procs[leader].signal(t, syscall.SIGKILL)
		procs[leader].wait(t)
		waitFor(t, pool, "the other leads", `select worker_id = $1 and term > $2 from queues.leader`, other, term)
		elected := q[time.Time](t, pool, `select elected_at from queues.leader`)
		require.True(t, elected.Before(expires), "round %d: taken at %s, before the dead leader's lease ran out at %s", round, elected, expires)
		handovers = append(handovers, elected.Sub(killed))
		waitFor(t, pool, "the dead leader's tasks back", `select count(*) = 0 from queues.task where worker_id = $1 and status = 'running'`, leader)
		for _, r := range releasesOf(t, pool, leader, fromLeader) {
			require.Equal(t, "recovered:session_lost", r.how, "round %d", round)
		}
		all = append(all, ids...)
		procs[leader] = startWorkerProc(t, url, "TASKORCH_WORKER_ID="+leader) // the same id, again
	}
	waitFor(t, pool, "everything completed", `select count(*) = $2 from queues.task where task_id = any ($1) and status = 'completed'`, all, len(all))
	requireCompletedOnce(t, pool, all)
	t.Logf("leader SIGKILLed 3 times: the other elected after %s", durations(handovers))
}

// A worker restarted under the same TASKORCH_WORKER_ID after a SIGKILL takes its id over and
// recovers at once the tasks the killed process held (alone, no leader could have: cause
// worker_restarted), which then run once; a second process started under that id while the
// first lives is refused and waits, and takes over once the first is gone.
func TestE2ERestartedWorkerTakesOverItsID(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	completionLedger(t, pool)
	first := startWorkerProc(t, url, "TASKORCH_WORKER_ID=w1")
	var ids []int64
	for range 5 {
		ids = append(ids, enqueue(t, pool, "taskorch.sleep", `{"ms": 3000}`, 0))
	}
	waitFor(t, pool, "w1 runs them", `select count(*) = 5 from queues.task where worker_id = 'w1' and status = 'running'`)

	twin := startWorkerProc(t, url, "TASKORCH_WORKER_ID=w1")
	select {
	case line := <-twin.out.lineWith("in use by a live worker"):
		require.Contains(t, line, "w1")
	case <-time.After(60 * time.Second):
		t.Fatal("the second process under w1 was not refused")
	}
	first.signal(t, syscall.SIGKILL)
	first.wait(t)
	waitFor(t, pool, "the killed process's tasks back", `select count(*) = 0 from queues.task where task_id = any ($1) and status = 'running' and attempt = 1`, ids)
	for _, r := range releasesOf(t, pool, "w1", ids) {
		if r.how == "recovered:worker_restarted" || r.how == "recovered:session_lost" {
			continue
		}
		t.Fatalf("a task of the killed process ended by %s", r.how)
	}
	require.Equal(t, 5, q[int](t, pool, `select count(*) from queues.error where context->>'cause' = 'worker_restarted' and task_id = any ($1)`, ids),
		"alone, only the process taking the id over recovers them")
	waitFor(t, pool, "everything completed", `select count(*) = 5 from queues.task where task_id = any ($1) and status = 'completed'`, ids)
	requireCompletedOnce(t, pool, ids)
}
