package taskorch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskorch/taskorch/internal/batcher"
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

	slots       chan struct{}                        // one token per running task
	ready       *readyBuffer                         // tasks claimed ahead of free slots (claim_ahead.go)
	room        chan struct{}                        // a slot freed: the fetcher may claim
	freed       atomic.Int64                         // slots freed so far, for the claim-ahead target
	busy        atomic.Int64                         // nanoseconds those slots were held by their tasks
	staleAhead  atomic.Int64                         // times the renewer gave back buffered tasks that waited too long
	wake        chan struct{}                        // a NOTIFY arrived
	leaseCheck  chan struct{}                        // a running task may have been cancelled (lease_check.go)
	listening   atomic.Bool                          // the LISTEN connection is up: cancel notifications arrive
	completions *completions                         // succeeded tasks, for the completer
	before      *batcher.Batcher[beforeCall, []byte] // channel tasks' before handlers (before_batch.go)
	hardStop    chan struct{}
	stopOnce    sync.Once

	mu sync.Mutex
	// running holds the running tasks by lease id, from start until finish. A task can run
	// twice on one worker for a moment (a run whose lease was lost is still returning when a new
	// claim of the task starts): each run is its own entry, and ends only its own.
	running map[int64]*runningTask
	// cancelHints: cancel notifications that named no running task (lease_check.go).
	cancelHints cancelHints
	wg          sync.WaitGroup // task goroutines

	// background runs alongside the fetch loop until the worker stops.
	background []func(ctx context.Context)

	maint      *maintenance.Maintainer // registry, heartbeats, leadership and the leader's duties
	registered chan struct{}           // closed once the worker is in queues.worker
	metrics    *metrics                // nil without WorkerConfig.Registerer
	dl         *delivery               // the transport's side (delivery.go); nil without a transport (PostgreSQL delivery)
	tracer     trace.Tracer            // nil without WorkerConfig.TracerProvider

	// noLimitWaitUntil (unix nanoseconds): until then, a short claim does not ask for the
	// limits' wait hint (fetcher.go's limitWait).
	noLimitWaitUntil atomic.Int64
}

// runningTask is a claimed task from start until its outcome is finished (outcome.go).
type runningTask struct {
	task    *Task
	ctx     context.Context // the task's context, with its span
	cancel  context.CancelCauseFunc
	started time.Time
	endSpan func()
	// recording is set once the task's outcome is handed to record: from then on the lease may
	// end by the task's own outcome (a completion waiting for the completer's batch), which the
	// renewer must not take for a lost lease.
	recording atomic.Bool
	// leaseGone is set once the worker has found the task's lease lost and stopped it: the loss
	// is counted and logged once.
	leaseGone atomic.Bool
	// result is the completion's result, handed to the completer with the task (outcome.result).
	result json.RawMessage
	// handler and handlerBody: the success handler the completer runs with the completion
	// (outcome.handler).
	handler     string
	handlerBody []byte
}

// NewWorker returns a worker over pool. The pool should allow Concurrency + 4 connections: a
// db_function task holds one for its transaction, and the fetcher, the completer, the lease
// renewer (or the lease check, lease_check.go) and the listener use one each. The worker's
// session (WorkerConfig.SessionGrace) is one more connection, taken out of the pool.
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
	if !c.ClaimUnknownTypes {
		types = knownTypes(c)
	}
	m, err := newMetrics(c.Registerer, pool)
	if err != nil {
		return nil, err
	}
	registered := make(chan struct{})
	var once sync.Once
	var w *Worker
	maint, err := maintenance.New(pool, maintenance.Config{
		OnEvent: func(e maintenance.Event) {
			if e.Kind == maintenance.EventRegistered {
				once.Do(func() { close(registered) })
				if e.Reregistered {
					// Registered again after its session was lost or it was reaped: the leader
					// may have recovered tasks it runs. Stop those now (lease_check.go).
					w.signalLeaseCheck()
				}
			}
			m.maintenanceEvent(e)
		},
		Session:           sessionOpener(pool, c),
		SessionGrace:      noGraceIfNegative(c.SessionGrace),
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
		HistoryRetention:  keepForeverIfNegative(c.HistoryRetention),
		Logger:            c.Logger, // it adds worker_id itself
	})
	if err != nil {
		return nil, &InputError{Msg: err.Error()}
	}
	w = &Worker{
		maint:       maint,
		registered:  registered,
		metrics:     m,
		tracer:      newTracer(c.TracerProvider),
		pool:        pool,
		cfg:         c,
		log:         c.Logger.With("worker_id", c.ID),
		slots:       make(chan struct{}, c.Concurrency),
		ready:       newReadyBuffer(),
		room:        make(chan struct{}, 1),
		wake:        make(chan struct{}, 1),
		leaseCheck:  make(chan struct{}, 1),
		completions: newCompletions(2*c.Concurrency + maxCompletionBatch),
		hardStop:    make(chan struct{}),
		running:     map[int64]*runningTask{},
	}
	w.before = w.newBeforeBatcher()
	if w.dl, err = newDelivery(w); err != nil {
		return nil, err
	}
	return w, nil
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.cfg.ID }

// IsLeader reports whether this worker currently holds the leader lease.
func (w *Worker) IsLeader() bool { return w.maint.IsLeader() }

// sessionOpener returns how the worker opens its session (WorkerConfig.SessionGrace): with
// ListenConfig, a direct connection (the pool may go through a transaction pooler); else a
// connection of the pool, taken out of it for good; PollOnly, none (a transaction pooler holds
// no session: heartbeats alone tell).
func sessionOpener(pool *pgxpool.Pool, c WorkerConfig) func(context.Context) (*pgx.Conn, error) {
	switch {
	case c.ListenConfig != nil:
		return func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, c.ListenConfig) }
	case c.PollOnly:
		return nil
	default:
		return func(ctx context.Context) (*pgx.Conn, error) {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				return nil, err
			}
			return conn.Hijack(), nil
		}
	}
}

func noGraceIfNegative(d time.Duration) time.Duration {
	if d < 0 {
		return maintenance.NoGrace
	}
	return d
}

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
// lets running tasks finish for up to ShutdownGrace, cancels the rest, writes the outcomes it
// has, gives back to pending every task the database says this worker still holds (their
// attempt not spent), and returns. HardStop cuts the grace period short.
func (w *Worker) Run(ctx context.Context) error {
	var listenConn *pgx.Conn
	if w.cfg.ListenConfig != nil {
		// A direct LISTEN connection that cannot hear the pool's NOTIFY would leave the worker
		// polling while its operator believes otherwise: refuse to start.
		c, err := w.openListen(ctx)
		if err != nil {
			return fmt.Errorf("taskorch: the LISTEN connection (ListenConfig): %w", err)
		}
		listenConn = c
	}
	if w.dl != nil {
		if err := w.dl.open(ctx); err != nil {
			if listenConn != nil {
				_ = listenConn.Close(context.WithoutCancel(ctx))
			}
			return err
		}
	}
	// The worker's own machinery outlives ctx by the shutdown; it stops when Run returns.
	inner, stopInner := context.WithCancel(context.WithoutCancel(ctx))
	defer stopInner()
	stopServices := startServices(inner, w.services(listenConn))

	// Claim nothing before the worker is registered: the leader recovers the tasks of dead
	// workers it knows of, so a worker that claimed first and died at once would leave its tasks
	// to their lease.
	select {
	case <-w.registered:
	case <-ctx.Done():
	}
	w.log.Info("worker started", "concurrency", w.cfg.Concurrency, "lease_duration", w.cfg.LeaseDuration,
		"poll_only", w.cfg.PollOnly, "transport", transportName(w.cfg.Transport), "handlers", len(w.cfg.Handlers.Types()), "channels", len(w.cfg.Channels))
	if w.dl != nil {
		// Tasks of limited types are not sent over the transport: claim them from the database
		// alongside (docs/limits.md).
		limitedDone := make(chan struct{})
		go func() {
			defer close(limitedDone)
			w.runLimitedFetcher(ctx, inner)
		}()
		w.runTransportFetcher(ctx, inner)
		<-limitedDone
	} else {
		w.runFetcher(ctx, inner, nil)
	}
	w.drain()
	stopServices()
	w.log.Info("worker stopped")
	return nil
}

// service is one of the worker's components. Run starts them in the order services lists them
// and stops them in reverse, after the fetcher has stopped and the running tasks are drained.
type service struct {
	name string
	// run runs the component until its context is cancelled (nil: nothing runs; only stop).
	run func(ctx context.Context)
	// stop, when set, is called first to stop it, with its context (not yet cancelled); run
	// must then return by itself, and the context is cancelled after. Without stop, the
	// context is cancelled and run waited for.
	stop func(ctx context.Context)
}

// services lists the worker's components in start order; they stop in reverse.
func (w *Worker) services(listenConn *pgx.Conn) []service {
	s := []service{
		// Registers the worker, heartbeats, and leads when elected; stopped last, it resigns and
		// deregisters once everything the worker held is written or given back.
		{name: "maintenance", run: func(ctx context.Context) { _ = w.maint.Run(ctx) }},
		{name: "queue stats", run: w.runQueueStats},
	}
	for _, fn := range w.background {
		s = append(s, service{name: "background", run: fn})
	}
	s = append(s,
		service{name: "lease renewer", run: w.runRenewer},
		// Stops running tasks cancelled meanwhile, told by the listener or checking on its own.
		service{name: "lease checker", run: w.runLeaseChecker},
	)
	if w.dl != nil {
		// Dispatches, probes, extends held messages and acknowledges; stopped after the
		// completer, so every acknowledgement of a written outcome is flushed.
		s = append(s, service{name: "transport", run: func(ctx context.Context) {
			w.dl.start(ctx)
			<-ctx.Done()
			w.dl.stop()
		}})
	}
	s = append(s,
		// Gives back what the database says this worker still holds: tasks stopped without an
		// outcome, claimed but not started, or whose completion could not be written.
		service{name: "give back", stop: w.giveBack},
		service{name: "completer", run: w.runCompleter, stop: func(context.Context) { w.completions.close() }},
	)
	if !w.cfg.PollOnly {
		s = append(s, service{name: "listener", run: func(ctx context.Context) { w.runListener(ctx, listenConn) }})
	}
	return s
}

// startServices starts svcs in order on contexts derived from ctx and returns the function
// that stops them in reverse order.
func startServices(ctx context.Context, svcs []service) (stopAll func()) {
	type started struct {
		service
		ctx    context.Context
		cancel context.CancelFunc
		done   chan struct{}
	}
	all := make([]started, 0, len(svcs))
	for _, s := range svcs {
		sctx, cancel := context.WithCancel(ctx)
		st := started{service: s, ctx: sctx, cancel: cancel, done: make(chan struct{})}
		if s.run == nil {
			close(st.done)
		} else {
			go func() { defer close(st.done); s.run(sctx) }()
		}
		all = append(all, st)
	}
	return func() {
		for i := len(all) - 1; i >= 0; i-- {
			s := all[i]
			if s.stop != nil {
				s.stop(s.ctx)
			} else {
				s.cancel()
			}
			<-s.done
			s.cancel()
		}
	}
}

// HardStop makes a stopping worker cancel its running tasks at once instead of waiting out
// ShutdownGrace (a second Ctrl-C). They are given back to pending.
func (w *Worker) HardStop() {
	w.stopOnce.Do(func() { close(w.hardStop) })
}

// drain waits up to ShutdownGrace (or HardStop) for the running tasks, then cancels those left
// (ErrShutdown) and waits a little more for them to return. What they leave without an outcome
// is given back by the "give back" service.
func (w *Worker) drain() {
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
		return
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
}

// giveBack returns to pending every task the database says this worker still holds, without
// spending their attempt. Run calls it once the completer has written every completion.
func (w *Worker) giveBack(ctx context.Context) {
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var released []int64
	err := w.retryDB(octx, "release tasks", func(ctx context.Context) error {
		rows, err := w.pool.Query(ctx, `select * from queues.release_worker_tasks($1, $2)`, w.cfg.ID,
			fmt.Sprintf("worker %s shut down before the task finished", w.cfg.ID))
		if err != nil {
			return err
		}
		released, err = collectInt64s(rows)
		return err
	})
	switch {
	case err != nil:
		w.log.Error("could not give tasks back; their leases will expire", "error", err)
	case len(released) > 0:
		w.log.Info("gave running tasks back to pending", "released", len(released), "tasks", released)
	}
}

func (w *Worker) runningCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}
