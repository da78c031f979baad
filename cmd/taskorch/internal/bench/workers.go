package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/taskorch/taskorch"
	taskorchprom "github.com/taskorch/taskorch/contrib/prometheus"
)

// WorkerOptions configure the in-process workers of a run.
type WorkerOptions struct {
	// Workers is how many taskorch.Worker instances run in the process, each with its own claim
	// loop, completer and listener, sharing one pool. Defaults to 1.
	Workers int
	// Concurrency is each worker's number of task slots. Defaults depend on the mode.
	Concurrency int
	// FetchBatch caps one claim. 0 (the default) leaves the worker's own default, as the stock
	// worker has it (WorkerConfig.FetchBatch: Concurrency + ClaimAhead, at most 1,000).
	FetchBatch int
	// Metrics gives each worker a Prometheus registry, as the stock `taskorch worker` has, so the
	// metrics' cost is in the figure. Defaults to false.
	Metrics bool
}

func (o WorkerOptions) withDefaults(concurrency int) WorkerOptions {
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if o.Concurrency <= 0 {
		o.Concurrency = concurrency
	}
	if o.FetchBatch < 0 {
		o.FetchBatch = 0
	}
	return o
}

// defaultFetchBatchMax is the most tasks one claim takes with the worker's default FetchBatch
// (WorkerConfig: Concurrency + ClaimAhead, at most 1,000, or Concurrency if that is more).
func defaultFetchBatchMax(concurrency int) int { return max(1000, concurrency) }

// fetchBatchText describes a run's FetchBatch in its table.
func fetchBatchText(n int) string {
	if n > 0 {
		return strconv.Itoa(n)
	}
	return "the worker's default"
}

// connsPerWorker are the connections a worker holds besides its tasks' (fetcher, completer,
// listener, renewer, heartbeats).
const connsPerWorker = 5

// workerGroup is the workers of a run.
type workerGroup struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startWorkers starts o.Workers workers on pool with cfg (ID, logger and registry are set
// here); they run until stop.
func (e *Env) startWorkers(ctx context.Context, pool *pgxpool.Pool, o WorkerOptions, cfg taskorch.WorkerConfig) (*workerGroup, error) {
	run := randomHex(3)
	ws := make([]*taskorch.Worker, o.Workers)
	for i := range ws {
		c := cfg
		c.ID = fmt.Sprintf("bench-%s-%d", run, i)
		c.Concurrency = o.Concurrency
		c.FetchBatch = o.FetchBatch
		c.Logger = e.log
		c.PollOnly, c.ListenConfig = e.opts.PollOnly, e.listen
		if c.ShutdownGrace == 0 {
			c.ShutdownGrace = 5 * time.Second
		}
		if o.Metrics {
			c.Observers = append(c.Observers[:len(c.Observers):len(c.Observers)], taskorchprom.New(prometheus.NewRegistry()))
		}
		w, err := taskorch.NewWorker(pool, &c)
		if err != nil {
			return nil, fmt.Errorf("bench: worker: %w", err)
		}
		ws[i] = w
	}
	wctx, cancel := context.WithCancel(ctx)
	g := &workerGroup{cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() { _ = w.Run(wctx) })
	}
	go func() { wg.Wait(); close(g.done) }()
	return g, nil
}

// stop stops the workers and waits for them to finish (they record what they hold first).
func (g *workerGroup) stop() {
	g.cancel()
	<-g.done
}

// workerPool returns a pool for o's workers: connsPerWorker each, plus perTask connections per
// task slot (a db_function task holds one for its transaction).
func (e *Env) workerPool(ctx context.Context, o WorkerOptions, perTask int) (*pgxpool.Pool, error) {
	n := o.Workers * (connsPerWorker + perTask*o.Concurrency)
	return e.NewPool(ctx, int32(min(n, 1000)), nil) //nolint:gosec // bounded above
}

// firstHandledTimeout bounds the wait for a run's first task handled.
const firstHandledTimeout = time.Minute

// waitFirstHandled waits until the workers have handled a task, the producer failed (errs), or
// firstHandledTimeout passed. A warm-up starts there: the workers' start-up (registration,
// LISTEN, the first claim) is not part of a steady state, and on a loaded machine it can
// outlast a short warm-up.
func (e *Env) waitFirstHandled(ctx context.Context, count *counter, errs <-chan error) error {
	deadline := time.NewTimer(firstHandledTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for count.n.Load() == 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errs:
			return fmt.Errorf("bench: enqueue: %w", err)
		case <-deadline.C:
			return fmt.Errorf("bench: no task handled within %s of the workers' start", firstHandledTimeout)
		case <-tick.C:
		}
	}
	return nil
}
