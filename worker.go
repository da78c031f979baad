package taskorch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskorch/taskorch/internal/maintenance"
)

// Worker claims tasks from PostgreSQL and runs them: db_function tasks through
// internal.run_function, channel tasks through their providers with the before/success/error
// handler protocol, and everything else through Go handlers registered by type.
//
// Several workers, in one process or on many machines, can share one database: a task is
// claimed by one worker at a time under a lease, and only that lease can record its outcome.
type Worker struct {
	pool *pgxpool.Pool
	cfg  WorkerConfig
	log  *slog.Logger

	slots     chan struct{} // one token per running task
	wake      chan struct{} // a NOTIFY arrived
	completed chan completion
	hardStop  chan struct{}
	stopOnce  sync.Once

	mu         sync.Mutex
	running    map[int64]*runningTask // by task id
	unreleased []*runningTask         // stopped by shutdown without an outcome: to give back
	wg         sync.WaitGroup         // running tasks

	// background runs alongside the fetch loop until the worker stops.
	background []func(ctx context.Context)

	maint      *maintenance.Maintainer // registry, heartbeats, leadership and the leader's duties
	registered chan struct{}           // closed once the worker is in queues.worker
	metrics    *metrics                // nil without WorkerConfig.Registerer
	dl         *delivery               // the transport's side (delivery.go); nil with TransportPostgres
	tracer     trace.Tracer            // nil without WorkerConfig.TracerProvider
}

type runningTask struct {
	task   *Task
	cancel context.CancelCauseFunc
}

// NewWorker returns a worker over pool. The pool should allow Concurrency + 4 connections: a
// db_function task holds one for its transaction, and the fetcher, the completer, the lease
// renewer and the listener use one each.
func NewWorker(pool *pgxpool.Pool, cfg *WorkerConfig) (*Worker, error) {
	if pool == nil {
		return nil, errors.New("taskorch: NewWorker needs a *pgxpool.Pool")
	}
	c := WorkerConfig{}
	if cfg != nil {
		c = *cfg
	}
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	var types []string
	if c.OnlyKnownTypes {
		types = knownTypes(c)
	}
	m, err := newMetrics(c.Registerer, pool)
	if err != nil {
		return nil, err
	}
	registered := make(chan struct{})
	var once sync.Once
	maint, err := maintenance.New(pool, maintenance.Config{
		OnEvent: func(e maintenance.Event) {
			if e.Kind == maintenance.EventRegistered {
				once.Do(func() { close(registered) })
			}
			m.maintenanceEvent(e)
		},
		WorkerID:          c.ID,
		PoolSize:          c.Concurrency,
		Version:           c.Version,
		Transport:         c.Transport,
		TaskTypes:         types,
		HeartbeatInterval: c.HeartbeatInterval,
		WorkerTimeout:     c.WorkerTimeout,
		LeaderTTL:         c.LeaderTTL,
		Retention:         keepForeverIfNegative(c.Retention),
		FailedRetention:   keepForeverIfNegative(c.FailedRetention),
		Logger:            c.Logger, // it adds worker_id itself
	})
	if err != nil {
		return nil, &InputError{Msg: err.Error()}
	}
	w := &Worker{
		maint:      maint,
		registered: registered,
		metrics:    m,
		tracer:     newTracer(c.TracerProvider),
		pool:       pool,
		cfg:        c,
		log:        c.Logger.With("worker_id", c.ID),
		slots:      make(chan struct{}, c.Concurrency),
		wake:       make(chan struct{}, 1),
		completed:  make(chan completion, c.Concurrency*2),
		hardStop:   make(chan struct{}),
		running:    map[int64]*runningTask{},
	}
	if w.dl, err = newDelivery(w); err != nil {
		return nil, err
	}
	return w, nil
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.cfg.ID }

// IsLeader reports whether this worker currently holds the leader lease.
func (w *Worker) IsLeader() bool { return w.maint.IsLeader() }

func keepForeverIfNegative(d time.Duration) time.Duration {
	if d < 0 {
		return maintenance.KeepForever
	}
	return d
}

// AddBackground registers a function the worker runs in its own goroutine from Run until it
// stops; its context is cancelled after the running tasks are finished or given back. Call it
// before Run.
func (w *Worker) AddBackground(fn func(ctx context.Context)) {
	w.background = append(w.background, fn)
}

// Run claims and runs tasks until ctx is done, then shuts down gracefully: it stops claiming,
// lets running tasks finish for up to ShutdownGrace, cancels the rest and gives them back to
// pending (their attempt not spent), and returns. HardStop cuts the grace period short.
func (w *Worker) Run(ctx context.Context) error {
	if w.dl != nil {
		if err := w.dl.open(ctx); err != nil {
			return err
		}
	}
	// The worker's own machinery outlives ctx by the shutdown; it stops when Run returns.
	inner, stopInner := context.WithCancel(context.WithoutCancel(ctx))
	defer stopInner()

	bg := sync.WaitGroup{}
	bgCtx, stopBG := context.WithCancel(inner)
	defer stopBG()
	for _, fn := range w.background {
		bg.Go(func() { fn(bgCtx) })
	}
	// Registers the worker, heartbeats, and leads when elected; on stop it resigns and
	// deregisters, after the running tasks are finished or given back.
	bg.Go(func() { _ = w.maint.Run(bgCtx) })
	bg.Go(func() { w.runQueueStats(bgCtx) })

	completerDone := make(chan struct{})
	go func() { defer close(completerDone); w.runCompleter(inner) }()
	renewCtx, stopRenew := context.WithCancel(inner)
	renewDone := make(chan struct{})
	go func() { defer close(renewDone); w.runRenewer(renewCtx) }()

	listenCtx, stopListen := context.WithCancel(ctx)
	listenDone := make(chan struct{})
	if w.cfg.PollOnly {
		close(listenDone)
	} else {
		go func() { defer close(listenDone); w.runListener(listenCtx) }()
	}

	// Claim nothing before the worker is registered: the leader recovers the tasks of dead
	// workers it knows of, so a worker that claimed first and died at once would leave its tasks
	// to their lease.
	select {
	case <-w.registered:
	case <-ctx.Done():
	}
	w.log.Info("worker started", "concurrency", w.cfg.Concurrency, "lease_duration", w.cfg.LeaseDuration,
		"poll_only", w.cfg.PollOnly, "transport", w.cfg.Transport, "handlers", len(w.cfg.Handlers.Types()), "channels", len(w.cfg.Channels))
	if w.dl != nil {
		w.dl.start(ctx)
		w.runTransportFetcher(ctx, inner)
	} else {
		w.runFetcher(ctx, inner, nil)
	}

	stopListen()
	<-listenDone
	w.shutdown(inner)
	close(w.completed)
	<-completerDone
	if w.dl != nil {
		w.dl.stop() // after the completer: its acknowledgements are queued
	}
	stopRenew()
	<-renewDone
	stopBG()
	bg.Wait()
	w.log.Info("worker stopped")
	return nil
}

// HardStop makes a stopping worker cancel its running tasks at once instead of waiting out
// ShutdownGrace (a second Ctrl-C). They are given back to pending.
func (w *Worker) HardStop() {
	w.stopOnce.Do(func() { close(w.hardStop) })
}

// shutdown waits for running tasks, then cancels and gives back what is left.
func (w *Worker) shutdown(ctx context.Context) {
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	n := w.runningCount()
	if n > 0 {
		w.log.Info("waiting for running tasks", "running", n, "grace", w.cfg.ShutdownGrace)
	}
	grace := time.NewTimer(w.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
	case <-w.hardStop:
	}
	w.mu.Lock()
	for _, r := range w.running {
		r.cancel(ErrShutdown)
	}
	w.mu.Unlock()
	// Handlers should return once cancelled; those that do not are given back anyway: the lease
	// fences them, so their late outcome will be refused.
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		w.log.Warn("tasks did not return after cancellation; giving them back anyway", "running", w.runningCount())
	}
	w.mu.Lock()
	var give []*runningTask
	give = append(give, w.unreleased...)
	for _, r := range w.running {
		give = append(give, r)
	}
	w.unreleased = nil
	w.mu.Unlock()
	if len(give) == 0 {
		return
	}
	ids := make([]int64, len(give))
	leases := make([]int64, len(give))
	for i, r := range give {
		ids[i], leases[i] = r.task.ID, *r.task.LeaseID
	}
	var released []int64
	err := w.retryDB(ctx, "release tasks", func(ctx context.Context) error {
		rows, err := w.pool.Query(ctx, `select * from queues.release_tasks($1, $2, $3)`, ids, leases,
			fmt.Sprintf("worker %s shut down before the task finished", w.cfg.ID))
		if err != nil {
			return err
		}
		released, err = collectInt64s(rows)
		return err
	})
	if err != nil {
		w.log.Error("could not give tasks back; their leases will expire", "tasks", ids, "error", err)
		return
	}
	w.log.Info("gave running tasks back to pending", "released", len(released), "of", len(ids))
}

func (w *Worker) runningCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}
