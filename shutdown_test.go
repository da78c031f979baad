package taskorch_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// stopRound is one start-and-stop of a worker in TestGracefulStopStrandsNothing.
type stopRound struct {
	stopAt  int64 // the stop comes once this many quick tasks have run...
	ran     atomic.Int64
	reached chan struct{}
	once    sync.Once
}

func (r *stopRound) quickRan() {
	if r.ran.Add(1) >= r.stopAt {
		r.once.Do(func() { close(r.reached) })
	}
}

// Stopping a worker (cancelling Run's context, what SIGTERM does in cmd/taskorch) strands
// nothing: once Run has returned, no task is running under the worker's id, and no task it gave
// back has spent an attempt. Under load a claim is nearly always in flight when the stop comes;
// the worker must not let a claim that committed in the database go unseen (its tasks would be
// running under a worker that is gone until their lease expires, and the expiry would spend an
// attempt).
//
// The worker reaches PostgreSQL through delayProxy, which hands the server's answers back 5-20ms
// late: a claim the stop cuts short has then usually committed before the client gave up on it,
// as on any network with latency. Each round starts a worker over a backlog of quick tasks (and a
// few slow ones that run until they are stopped, so some are running at the stop), lets it run
// a random number of quick tasks plus a random jitter, stops it, waits for Run to return, and
// checks the database.
func TestGracefulStopStrandsNothing(t *testing.T) {
	t.Parallel()
	const (
		rounds      = 30
		concurrency = 8
		slowTasks   = 3 // priority 1: claimed first, so they are running at every stop
		backlog     = 300
	)
	ctx := context.Background()
	url := dbtest.NewDBURL(t)
	direct, err := pgxpool.New(ctx, url) // the test's own view of the database, without delay
	require.NoError(t, err)
	t.Cleanup(direct.Close)

	pcfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	proxy := startDelayProxy(t, net.JoinHostPort(pcfg.ConnConfig.Host, strconv.Itoa(int(pcfg.ConnConfig.Port))),
		5*time.Millisecond, 20*time.Millisecond)
	pcfg.ConnConfig.Host, pcfg.ConnConfig.Port = "127.0.0.1", proxy.Port()
	pcfg.MaxConns = concurrency + 8
	workerPool, err := pgxpool.NewWithConfig(ctx, pcfg)
	require.NoError(t, err)
	t.Cleanup(workerPool.Close)

	var current atomic.Pointer[stopRound]
	hs := taskorch.NewHandlers()
	hs.HandleFunc("stop_quick", func(context.Context, *taskorch.Task) error {
		if r := current.Load(); r != nil {
			r.quickRan()
		}
		return nil
	})
	hs.HandleFunc("stop_slow", func(ctx context.Context, _ *taskorch.Task) error {
		<-ctx.Done() // runs until the worker stops it
		return context.Cause(ctx)
	})

	seed := uint64(time.Now().UnixNano())
	rnd := rand.New(rand.NewPCG(seed, 7))
	t.Logf("seed %d", seed)

	type strandedRound struct {
		round    int
		inFlight int
		stranded []int64
	}
	var (
		strandedRounds  []strandedRound
		spentAttempts   []int64
		inFlightAtStop  int
		runningAtStop   int
		totalStranded   int
		start           = time.Now()
		cutShortAtStart = proxy.CutShort()
	)
	for round := range rounds {
		if n := scalar[int64](t, direct, `select count(*) from queues.task where task_type = 'stop_quick' and status = 'pending'`); n < backlog {
			mustExec(t, direct, `select queues.enqueue_many(array_fill('stop_quick'::text, array[$1::int]), array_fill('{}'::jsonb, array[$1::int]))`, 2*backlog)
		}
		if n := scalar[int64](t, direct, `select count(*) from queues.task where task_type = 'stop_slow' and status = 'pending'`); n < slowTasks {
			mustExec(t, direct, `select queues.enqueue('stop_slow', '{}', now(), 1) from generate_series(1, $1::int)`, slowTasks-n)
		}

		r := &stopRound{stopAt: 5 + rnd.Int64N(80), reached: make(chan struct{})}
		current.Store(r)
		id := fmt.Sprintf("stop-%02d", round)
		w, err := taskorch.NewWorker(workerPool, &taskorch.WorkerConfig{
			ID: id, Handlers: hs, Concurrency: concurrency, ShutdownGrace: 50 * time.Millisecond,
			LeaseDuration: time.Minute, PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		require.NoError(t, err)
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(runCtx) }()

		select {
		case <-r.reached:
		case err := <-done:
			stop()
			t.Fatalf("round %d: Run returned before it was stopped: %v", round, err)
		case <-time.After(10 * time.Second):
			stop()
			t.Fatalf("round %d: %d of %d quick tasks ran in 10s", round, r.ran.Load(), r.stopAt)
		}
		if round%2 == 0 {
			// Every other stop comes right after a claim was sent: its answer, which the proxy
			// holds back at least 5 ms, is in flight at the stop. (A worker holding a full
			// claim-ahead buffer claims again once half of it has run.)
			select {
			case <-proxy.ClaimSent(): // the latest claim, perhaps answered already: wait for the next
			default:
			}
			select {
			case <-proxy.ClaimSent():
			case <-time.After(10 * time.Second):
				stop()
				t.Fatalf("round %d: the worker sent no claim in 10s", round)
			}
		} else {
			// The other stops come at a random moment of the worker's steady state (not in step
			// with a task's end or a claim): the jitter is the point, not a wait for something.
			<-time.After(time.Duration(rnd.Int64N(int64(15 * time.Millisecond))))
		}
		inFlight := proxy.ClaimsInFlight()
		if inFlight > 0 {
			inFlightAtStop++
		}
		if scalar[int64](t, direct, `select count(*) from queues.task where status = 'running' and worker_id = $1 and task_type = 'stop_slow'`, id) > 0 {
			runningAtStop++
		}
		stop()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(15 * time.Second):
			t.Fatalf("round %d: Run did not return within 15s of the stop", round)
		}
		current.Store(nil)

		stranded := scalar[[]int64](t, direct, `select coalesce(array_agg(task_id order by task_id), '{}') from queues.task
			where status = 'running' and worker_id = $1`, id)
		if len(stranded) > 0 {
			strandedRounds = append(strandedRounds, strandedRound{round: round, inFlight: inFlight, stranded: stranded})
			totalStranded += len(stranded)
		}
		// A task given back (released at the stop, or a claim undone) keeps its attempt: pending
		// tasks of this test have never failed, so their attempt is 0. (A lease that expired, or
		// a worker reaped, would have spent one.)
		spentAttempts = scalar[[]int64](t, direct, `select coalesce(array_agg(task_id order by task_id), '{}') from queues.task
			where status = 'pending' and attempt > 0`)
	}
	t.Logf("%d rounds in %s: a claim in flight at %d stops (the proxy saw %d connections closed by the worker right after a claim), slow tasks running at %d; %d rounds stranded %d tasks",
		rounds, time.Since(start).Round(time.Millisecond), inFlightAtStop, proxy.CutShort()-cutShortAtStart, runningAtStop, len(strandedRounds), totalStranded)
	require.Positive(t, inFlightAtStop, "no stop came with a claim in flight: the test did not test anything")
	require.Positive(t, runningAtStop, "no stop came with a task running")

	if len(strandedRounds) > 0 {
		var b strings.Builder
		for _, s := range strandedRounds {
			fmt.Fprintf(&b, "\n  round %d (worker stop-%02d, %d claim(s) in flight at the stop): tasks %v", s.round, s.round, s.inFlight, s.stranded)
		}
		t.Errorf("%d task(s) left running under a worker whose Run returned (in %d of %d rounds); they wait for their lease to expire and spend an attempt:%s",
			totalStranded, len(strandedRounds), rounds, b.String())
	}
	require.Empty(t, spentAttempts, "tasks given back by a stopped worker spent an attempt")
}
