package taskorch_test

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// handledSet records every task a handler was called for.
type handledSet struct{ m sync.Map }

func (h *handledSet) add(id int64) { h.m.Store(id, true) }

// buffered lists, in id order, the tasks that worker holds (running) and that no handler was
// called for: its claim-ahead buffer. A quick task that an overlapping claim took can be buffered
// behind a held one, so the buffer is not hold tasks only; a finished quick task counts as
// running until the completer writes it, and was handled, so it is not counted.
func (h *handledSet) buffered(t *testing.T, db taskorch.DBTX, worker string) []int64 {
	t.Helper()
	var out []int64
	for _, id := range scalar[[]int64](t, db, `select coalesce(array_agg(task_id order by task_id), '{}') from queues.task
		where status = 'running' and worker_id = $1`, worker) {
		if _, ok := h.m.Load(id); !ok {
			out = append(out, id)
		}
	}
	return out
}

// aheadHandlers run "quick" tasks at once and hold "hold" tasks until their context ends,
// announcing each start of a held task on started and recording every task run in handled.
func aheadHandlers(started chan<- int64, handled *handledSet) *taskorch.Handlers {
	hs := taskorch.NewHandlers()
	hs.HandleFunc("quick", func(_ context.Context, t *taskorch.Task) error {
		handled.add(t.ID)
		return nil
	})
	hs.HandleFunc("hold", func(ctx context.Context, t *taskorch.Task) error {
		handled.add(t.ID)
		started <- t.ID
		<-ctx.Done()
		return ctx.Err()
	})
	return hs
}

// aheadPool is pool's database behind a proxy that answers 10-20 ms late. A claim's round trip
// then outlasts a quick task by far, so the worker always claims ahead (it aims at six round
// trips of work, internal/worker/buffer.go), however loaded the machine: without it, a machine busy enough
// to make a quick task look slow kept the buffer empty, and the tests below tested nothing.
func aheadPool(t *testing.T, pool *pgxpool.Pool) *pgxpool.Pool {
	t.Helper()
	cfg := pool.Config().Copy()
	proxy := startDelayProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))),
		10*time.Millisecond, 20*time.Millisecond)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", proxy.Port()
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// enqueueAhead enqueues quick tasks, then held ones (claimed after the quick ones: same priority,
// later ids), so that the worker has measured short tasks and claims ahead when it meets them.
func enqueueAhead(t *testing.T, db taskorch.DBTX, quick, hold int) {
	t.Helper()
	mustExec(t, db, `select queues.enqueue_many(array_fill('quick'::text, array[$1::int]), array_fill('{}'::jsonb, array[$1::int]))`, quick)
	mustExec(t, db, `select queues.enqueue_many(array_fill('hold'::text, array[$1::int]), array_fill('{}'::jsonb, array[$1::int]))`, hold)
}

// quickClaimed waits until no quick task is pending: each is completed or held by the worker.
// With two claims in flight a quick task can land in a later claim than a held one, and then
// waits in the buffer behind the held task that took the only slot.
func quickClaimed(t *testing.T, db taskorch.DBTX) {
	t.Helper()
	require.Eventually(t, func() bool {
		return scalar[int](t, db, `select count(*)::int from queues.task where task_type = 'quick' and status = 'pending'`) == 0
	}, 10*time.Second, 5*time.Millisecond)
}

// quickDone waits until the 300 quick tasks are completed (the completer writes in batches).
func quickDone(t *testing.T, db taskorch.DBTX) {
	t.Helper()
	require.Eventually(t, func() bool {
		return scalar[int](t, db, `select count(*)::int from queues.task where task_type = 'quick' and status = 'completed'`) == 300
	}, 10*time.Second, 5*time.Millisecond)
}

// After a run of short tasks the worker claims ahead of its free slots, never more than
// ClaimAhead; a graceful stop gives the buffered tasks back at once, without waiting out the
// grace given to the running task, and without spending their attempt.
func TestClaimAheadStopGivesBufferBack(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	enqueueAhead(t, pool, 300, 20)
	started := make(chan int64, 20)
	handled := &handledSet{}
	w, stop := startWorker(t, aheadPool(t, pool), &taskorch.WorkerConfig{ID: "ahead-stop", Handlers: aheadHandlers(started, handled),
		Concurrency: 1, ClaimAhead: 5, ShutdownGrace: time.Minute})

	running := <-started
	ahead := func() int { return len(handled.buffered(t, pool, "ahead-stop")) }
	require.Eventually(t, func() bool { return ahead() > 0 }, 10*time.Second, 5*time.Millisecond,
		"the worker holds tasks ahead of its one slot")
	require.LessOrEqual(t, ahead(), 5, "at most ClaimAhead ahead of the slot")
	quickClaimed(t, pool)

	stopped := make(chan struct{})
	go func() { defer close(stopped); stop() }()
	// The buffer goes back while the running task still has most of its minute of grace.
	require.Eventually(t, func() bool { return ahead() == 0 }, 10*time.Second, 5*time.Millisecond, "buffered tasks given back")
	require.Equal(t, "running", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, running))
	require.Positive(t, scalar[int](t, pool, `select count(*)::int from queues.task_event where event = 'released'
		and detail like '%stopped before the task started%'`))
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from queues.task where status = 'pending' and attempt > 0`),
		"a given-back task has not spent an attempt")
	select {
	case id := <-started:
		t.Fatalf("task %d started after the stop signal", id)
	default:
	}

	w.HardStop()
	<-stopped
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from queues.task where status = 'running'`),
		"the running task is given back too")
	require.Equal(t, 20, scalar[int](t, pool, `select count(*)::int from queues.task where task_type = 'hold' and status = 'pending'`))
}

// A buffered task waiting behind long work keeps its lease: the renewer renews it, and gives it
// back to pending when it has waited a whole renewal period (LeaseDuration/3), so no buffered
// lease expires; the worker then stops claiming ahead until a task finishes.
func TestClaimAheadLongWaitGivesBack(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	enqueueAhead(t, pool, 300, 10)
	started := make(chan int64, 10)
	_, _ = startWorker(t, aheadPool(t, pool), &taskorch.WorkerConfig{ID: "ahead-wait", Handlers: aheadHandlers(started, &handledSet{}),
		// A lease of 3 s, renewed every second: a 1 s lease missed its renewal once on a machine
		// starved by two CPU burners, and the test is about the buffer, not the renewer's speed.
		Concurrency: 1, ClaimAhead: 4, LeaseDuration: 3 * time.Second, ShutdownGrace: time.Millisecond})
	<-started

	// With the slot busy: the buffered tasks were given back, none expired.
	require.Eventually(t, func() bool {
		return scalar[int](t, pool, `select count(*)::int from queues.task_event where event = 'released'
			and detail like '%waited in the claim-ahead buffer%'`) > 0
	}, 10*time.Second, 10*time.Millisecond, "a buffered task that waited a renewal period is given back")
	deadline := time.Now().Add(4 * time.Second) // longer than a lease
	for time.Now().Before(deadline) {
		require.Zero(t, scalar[int](t, pool, `select count(*)::int from queues.task_event where event = 'lease_expired'`))
		require.Zero(t, scalar[int](t, pool, `select count(*)::int from queues.task where status = 'running' and lease_expires_at < now()`),
			"no lease held by the worker is past its expiry")
		time.Sleep(50 * time.Millisecond) // sampling the leases over time is the check
	}
	// After the give-back the worker claims for its free slots only: it holds just the running task.
	require.Equal(t, 1, scalar[int](t, pool, `select count(*)::int from queues.task where task_type = 'hold' and status = 'running' and worker_id = 'ahead-wait'`))
	select {
	case id := <-started:
		t.Fatalf("task %d started while the slot was busy", id)
	default:
	}
}

// ClaimAhead has an upper bound; a negative value turns claiming ahead off.
func TestClaimAheadConfig(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	_, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{ClaimAhead: 100001})
	require.ErrorContains(t, err, "worker claim-ahead must be at most 100000, got 100001")
	var ie *taskorch.InputError
	require.ErrorAs(t, err, &ie)

	enqueueAhead(t, pool, 300, 5)
	started := make(chan int64, 5)
	_, _ = startWorker(t, pool, &taskorch.WorkerConfig{ID: "ahead-off", Handlers: aheadHandlers(started, &handledSet{}),
		Concurrency: 1, ClaimAhead: -1, ShutdownGrace: time.Millisecond})
	<-started
	quickDone(t, pool)
	require.Equal(t, 1, scalar[int](t, pool, `select count(*)::int from queues.task where task_type = 'hold' and status = 'running'`),
		"without claiming ahead the worker holds only what its slot runs")
}

// A task cancelled while it waits in the claim-ahead buffer leaves the buffer without starting:
// the cancel notification names a task the worker holds, the lease check finds it cancelled, and
// its handler never runs — the slot goes to the next buffered task.
func TestClaimAheadCancelledTaskNeverStarts(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	enqueueAhead(t, pool, 300, 20)
	started := make(chan int64, 20)
	obs := newCountingObserver()
	handled := &handledSet{}
	w, stop := startWorker(t, aheadPool(t, pool), &taskorch.WorkerConfig{ID: "ahead-cancel", Handlers: aheadHandlers(started, handled),
		Concurrency: 1, ClaimAhead: 5, Observers: []taskorch.Observer{obs}})
	defer func() { w.HardStop(); stop() }()

	running := <-started
	buffered := func() []int64 { return handled.buffered(t, pool, "ahead-cancel") }
	require.Eventually(t, func() bool { return len(buffered()) > 0 }, 10*time.Second, 5*time.Millisecond,
		"the worker holds tasks ahead of its one slot")
	victim := buffered()[0]
	mustExec(t, pool, `select queues.cancel_task($1)`, victim)
	require.Eventually(t, func() bool { return obs.leasesLost.Load() == 1 }, 5*time.Second, 5*time.Millisecond,
		"the buffered task is dropped when it is cancelled, before any slot frees")

	mustExec(t, pool, `select queues.cancel_task($1)`, running) // frees the slot
	next := <-started
	require.NotEqual(t, victim, next, "the cancelled task started")
	_, ran := handled.m.Load(victim)
	require.False(t, ran, "the cancelled task started")
	require.Equal(t, "cancelled", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, victim))
}
