package main

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// The limits' guarantees (docs/limits.md), each tried with real `taskorch worker` processes
// claiming at once.

// sampler counts, every 10 ms until stopped, the running tasks of a type per key (the payload
// field key; "" without one) and keeps the highest count seen of each.
type sampler struct {
	mu   sync.Mutex
	max  map[string]int64
	stop chan struct{}
	done chan struct{}
}

func startSampler(t *testing.T, pool *pgxpool.Pool, taskType, keyField string) *sampler {
	t.Helper()
	s := &sampler{max: map[string]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			rows, err := pool.Query(context.Background(), `
				select coalesce(payload->>$2, ''), count(*) from queues.task
				where task_type = $1 and status = 'running' group by 1`, taskType, keyField)
			if err == nil {
				for rows.Next() {
					var k string
					var n int64
					if rows.Scan(&k, &n) == nil {
						s.mu.Lock()
						s.max[k] = max(s.max[k], n)
						s.mu.Unlock()
					}
				}
				rows.Close()
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(s.finish)
	return s
}

func (s *sampler) finish() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

func (s *sampler) maxima() map[string]int64 {
	s.finish()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

// 3 workers × concurrency 20 and 200 tasks of 100 ms under max_running 4: never more than 4
// run at once, 4 do, and a worker killed while it holds slots gives them back with its lease.
func TestE2ELimitMaxRunning(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `select queues.set_limit('taskorch.sleep', _max_running => 4)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `select queues.enqueue('taskorch.sleep', '{"ms": 100}') from generate_series(1, 200)`)
	require.NoError(t, err)
	s := startSampler(t, pool, "taskorch.sleep", "")

	env := []string{"TASKORCH_CONCURRENCY=20", "TASKORCH_LEASE_DURATION=2s"}
	victim := startWorkerProc(t, url, env...)
	startWorkerProc(t, url, env...)
	startWorkerProc(t, url, env...)

	// Kill one worker while it runs limited tasks: its slots stay taken until its leases
	// expire, then come back.
	waitFor(t, pool, "the victim runs a task", `select exists (select from queues.task t join queues.worker w using (worker_id)
		where t.status = 'running' and w.pid = $1)`, victim.cmd.Process.Pid)
	victim.signal(t, syscall.SIGKILL)
	victim.wait(t)

	waitFor(t, pool, "all 200 completed", `select count(*) = 200 from queues.task where task_type = 'taskorch.sleep' and status = 'completed'`)
	got := s.maxima()[""]
	require.LessOrEqual(t, got, int64(4), "never more than the limit running")
	require.Equal(t, int64(4), got, "the limit is reached")
	require.Zero(t, q[int64](t, pool, `select count(*) from queues.task where status <> 'completed'`), "nothing lost")
}

// Per key: 5 accounts, at most 2 running per account, 6 slots in all, and each account's tasks
// enqueued after the previous account's. Never more than 2 per account, and every account
// progresses from the start: among the first 20 tasks claimed (in lease order) each has one.
// First come, first served would start the last two accounts only after the first three had
// drained (about the 90th claim). Within one claim leases follow task age, not rank, and the
// workers start at different times, so a key can have had three turns before a late one's
// first (seen under the race detector: not among the first 10).
// (Completion order would not do: the worker records completions in batches, which share a
// timestamp.)
func TestE2ELimitPerKeyFair(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `select queues.set_limit('taskorch.sleep', _max_running => 2, _key_field => 'account')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `select queues.enqueue('taskorch.sleep', jsonb_build_object('ms', 50, 'account', 'acct-' || (i / 30)))
		from generate_series(0, 149) i order by i`)
	require.NoError(t, err)
	s := startSampler(t, pool, "taskorch.sleep", "account")
	for range 3 {
		startWorkerProc(t, url, "TASKORCH_CONCURRENCY=2")
	}

	waitFor(t, pool, "all 150 completed", `select count(*) = 150 from queues.task where task_type = 'taskorch.sleep' and status = 'completed'`)
	maxima := s.maxima()
	require.Len(t, maxima, 5)
	for k, n := range maxima {
		require.LessOrEqual(t, n, int64(2), "account %s", k)
	}
	order := q[[]string](t, pool, `select array_agg(t.payload->>'account' order by l.task_lease_id)
		from queues.task_lease l join queues.task t using (task_id)`)
	t.Logf("accounts in claim order: %v", order[:min(20, len(order))])
	require.Equal(t, int64(5), q[int64](t, pool, `
		select count(distinct t.payload->>'account') from (
			select task_id from queues.task_lease order by task_lease_id limit 20) first
		join queues.task t using (task_id)`), "every account among the first 20 claims: %v", order[:min(20, len(order))])
}

// A rate of 50 claims per second over 500 tasks: the claims never go faster than 50/s after the
// first burst, and no one-second window holds more than rate + burst. How close to 50/s they
// come is a matter of speed, which this test does not judge: workers starved of CPU (the whole
// suite beside two CPU burners on 2 cores) fall short — 41.8/s once — and claim latency eats
// into a rate by design (docs/limits.md). The burst of 25 lets the bucket bank half a second of
// tokens that late claims would otherwise lose.
func TestE2ELimitRate(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `select queues.set_limit('taskorch.noop', _rate_per_second => 50, _burst => 25)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `select queues.enqueue('taskorch.noop', '{}') from generate_series(1, 500)`)
	require.NoError(t, err)
	for range 3 {
		startWorkerProc(t, url, "TASKORCH_CONCURRENCY=20")
	}
	waitFor(t, pool, "all 500 completed", `select count(*) = 500 from queues.task where task_type = 'taskorch.noop' and status = 'completed'`)
	// The rate after the first burst: the 475 claims after the 25th, over the time they took.
	rate := q[float64](t, pool, `select (count(*) - 1) / extract(epoch from max(claimed_at) - min(claimed_at))::float8
		from (select claimed_at from queues.task where task_type = 'taskorch.noop' order by claimed_at offset 24) c`)
	t.Logf("claims per second: %.1f", rate)
	require.LessOrEqual(t, rate, 50*1.1, "claims per second after the first burst")
	// In no second more than 50 + 25 (the burst): a bucket takes its tokens at the time its
	// claim leased the tasks (internal.take_limit_tokens), so the limiter's clock is claimed_at
	// itself, however long a starved backend took between choosing and leasing. (It used to take
	// them by the clock read before choosing, and a loaded 2-core machine showed 89 claims in a
	// second of claimed_at.) A limiter that let the rate through would show hundreds.
	require.LessOrEqual(t, q[int64](t, pool, `select max(n) from (
		select count(*) as n from queues.task a join queues.task b
		  on b.task_type = a.task_type and b.claimed_at >= a.claimed_at and b.claimed_at < a.claimed_at + interval '1 second'
		where a.task_type = 'taskorch.noop' group by a.task_id) w`), int64(75))
}

// A worker killed while its rate claim sleeps in the database for the next token (docs/limits.md,
// "Waiting for the token"): the sleeping backend may still lease a task to the dead worker when
// it wakes; that task is recovered with the worker's other leases, and another worker runs it.
// Nothing is stranded or lost, and the rate's bound holds over the whole run, kill included.
func TestE2ELimitRateWorkerKilledWhileWaitingForToken(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `select queues.set_limit('taskorch.noop', _rate_per_second => 20, _burst => 1)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `select queues.enqueue('taskorch.noop', '{}') from generate_series(1, 60)`)
	require.NoError(t, err)

	victim := startWorkerProc(t, url, "TASKORCH_CONCURRENCY=4")
	// The victim is the only worker: a backend asleep in the token wait is one of its claims.
	waitFor(t, pool, "the victim ran a task and waits for the next token", `select
		exists (select from queues.task where task_type = 'taskorch.noop' and status = 'completed')
		and exists (select from pg_stat_activity where datname = current_database() and state = 'active'
		            and wait_event = 'PgSleep' and query like '%claim_limited_tasks_at_token%')`)
	victim.signal(t, syscall.SIGKILL)
	victim.wait(t)

	startWorkerProc(t, url, "TASKORCH_CONCURRENCY=4")
	waitFor(t, pool, "all 60 completed", `select count(*) = 60 from queues.task where task_type = 'taskorch.noop' and status = 'completed'`)
	require.Zero(t, q[int64](t, pool, `select count(*) from queues.task where status <> 'completed'`), "nothing failed, dead or stranded")
	// The bound, burst + rate × span plus a slack under one task: at most 1 + 20 claims in any
	// second of claimed_at (each task's last claim).
	require.LessOrEqual(t, q[int64](t, pool, `select max(n) from (
		select count(*) as n from queues.task a join queues.task b
		  on b.task_type = a.task_type and b.claimed_at >= a.claimed_at and b.claimed_at < a.claimed_at + interval '1 second'
		where a.task_type = 'taskorch.noop' group by a.task_id) w`), int64(21))
}
