package worker

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

	"github.com/taskorch/taskorch/internal/batcher"
	"github.com/taskorch/taskorch/internal/maintenance"
	"github.com/taskorch/taskorch/tasktype"
)

// Worker claims tasks from PostgreSQL and runs them (package taskorch's Worker is this, behind
// the public API). doc.go says how a task goes through it.
type Worker struct {
	pool  *pgxpool.Pool
	cfg   Config
	log   *slog.Logger
	types []string // the task types it claims (claimTypes): nil for every type
	lease string   // cfg.LeaseDuration, as the claims' interval argument

	slots        chan struct{}                        // one token per running task
	ready        *readyBuffer                         // claimed tasks waiting for a slot (buffer.go)
	room         chan struct{}                        // a slot freed: the fetcher may claim
	freed        atomic.Int64                         // slots freed so far, for the claim-ahead target
	busy         atomic.Int64                         // nanoseconds those slots were held by their tasks
	staleAhead   atomic.Int64                         // times the renewer gave back buffered tasks that waited too long
	wake         chan struct{}                        // a NOTIFY arrived
	settled      chan struct{}                        // an outcome of this worker's committed: a limit's running slot may have freed
	leaseCheck   chan struct{}                        // a running task may have been cancelled (lease_check.go)
	listening    atomic.Bool                          // the LISTEN connection is up: cancel notifications arrive
	completions  *completions                         // succeeded tasks, for the completer
	before       *batcher.Batcher[beforeCall, []byte] // channel tasks' before handlers (before_batch.go)
	checkpoints  *Checkpoints                         // durable workflows' checkpoints, grouped (checkpoints.go)
	hardStop     chan struct{}
	stopOnce     sync.Once
	quiet        atomic.Bool   // an operator quieted this worker: it claims nothing (quiet.go)
	quietChanged chan struct{} // quiet changed: the fetch loop looks again

	// life: Stop asks Run to stop (stopAsked, closed once); stopped is closed once Run has
	// returned, or by a Stop before Run, after which Run does not start.
	life      sync.Mutex
	state     runState
	stopAsked chan struct{}
	stopped   chan struct{}

	mu sync.Mutex
	// running holds the running tasks by lease id, from start until finish. A task can run
	// twice on one worker for a moment (a run whose lease was lost is still returning when a new
	// claim of the task starts): each run is its own entry, and ends only its own.
	running map[int64]*runningTask
	// cancelHints: cancel notifications that named no running task (lease_check.go).
	cancelHints cancelHints
	wg          sync.WaitGroup // task goroutines
	// batches holds the open batch of each batch handler's type with MaxWait (batch.go).
	batches map[string]*batchCall

	// background runs alongside the fetch loop until the worker stops.
	background []func(ctx context.Context)

	maint      *maintenance.Maintainer // registry, heartbeats, leadership and the leader's duties
	registered chan struct{}           // closed once the worker is in queues.worker
	obs        observers               // WorkerConfig.Observers (observe.go)
	dl         *delivery               // the transport's side (delivery.go); nil without a transport (PostgreSQL delivery)

	// noLimitWaitUntil (unix nanoseconds): until then, a short claim does not ask for the
	// limits' wait hint (limit_wait.go).
	noLimitWaitUntil atomic.Int64
}

// runningTask is a claimed task from start until its outcome is finished (outcome.go).
type runningTask struct {
	task    *tasktype.Task
	ctx     context.Context // the task's context, as the observers made it (its span)
	cancel  context.CancelCauseFunc
	started time.Time
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
	// batch is the batch the task runs in (batch.go), nil for a task run alone; batchSettled
	// (guarded by batch.mu) is set once the task joined it or ended without joining.
	batch        *batchCall
	batchSettled bool
}

// New returns a worker over pool with cfg (checked, its defaults applied). An error says what
// in cfg cannot work (a maintenance setting, an observer that refused to attach).
func New(pool *pgxpool.Pool, cfg Config) (*Worker, error) {
	if pool == nil {
		return nil, errors.New("NewWorker needs a *pgxpool.Pool")
	}
	registered := make(chan struct{})
	var once sync.Once
	w := &Worker{
		pool:         pool,
		cfg:          cfg,
		log:          cfg.Logger.With("worker_id", cfg.ID),
		types:        claimTypes(cfg),
		lease:        cfg.LeaseDuration.String(),
		slots:        make(chan struct{}, cfg.Concurrency),
		ready:        newReadyBuffer(),
		room:         make(chan struct{}, 1),
		wake:         make(chan struct{}, 1),
		settled:      make(chan struct{}, 1),
		leaseCheck:   make(chan struct{}, 1),
		completions:  newCompletions(2*cfg.Concurrency + maxCompletionBatch),
		checkpoints:  newCheckpoints(pool),
		hardStop:     make(chan struct{}),
		stopAsked:    make(chan struct{}),
		stopped:      make(chan struct{}),
		quietChanged: make(chan struct{}, 1),
		running:      map[int64]*runningTask{},
		batches:      map[string]*batchCall{},
		registered:   registered,
		obs:          observers(cfg.Observers),
	}
	maint, err := maintenance.New(pool, maintenance.Config{
		OnEvent: func(e maintenance.Event) {
			if e.Kind == maintenance.EventHeartbeat {
				w.setQuiet(e.Quiet)
			}
			if e.Kind == maintenance.EventRegistered {
				once.Do(func() { close(registered) })
				if e.Reregistered {
					// Registered again after its session was lost or it was reaped: the leader
					// may have recovered tasks it runs. Stop those now (lease_check.go).
					w.signalLeaseCheck()
				}
			}
			w.obs.maintenanceEvent(e)
		},
		Session:           sessionOpener(pool, cfg),
		SessionGrace:      noGraceIfNegative(cfg.SessionGrace),
		WorkerID:          cfg.ID,
		PoolSize:          cfg.Concurrency,
		Version:           cfg.Version,
		Transport:         cfg.Transport,
		TaskTypes:         w.types,
		HeartbeatInterval: cfg.HeartbeatInterval,
		WorkerTimeout:     cfg.WorkerTimeout,
		LeaderTTL:         cfg.LeaderTTL,
		Retention:         keepForeverIfNegative(cfg.Retention),
		FailedRetention:   keepForeverIfNegative(cfg.FailedRetention),
		HistoryRetention:  keepForeverIfNegative(cfg.HistoryRetention),
		Periodic:          cfg.Periodic,
		DeclarePeriodic:   cfg.DeclarePeriodic,
		Logger:            cfg.Logger, // it adds worker_id itself
	})
	if err != nil {
		return nil, err
	}
	w.maint = maint
	w.before = w.newBeforeBatcher()
	w.dl = newDelivery(w)
	info := tasktype.WorkerInfo{ID: cfg.ID, Pool: pool, TaskTypes: knownTypes(cfg), LongestRunning: w.longestRunning}
	for _, t := range info.TaskTypes {
		if IsChannelType(t) {
			info.Channels = append(info.Channels, t)
		}
	}
	if cfg.Transport != nil {
		info.Transport = cfg.Transport.Name()
	}
	for _, o := range w.obs {
		if err := o.Attach(info); err != nil {
			return nil, err
		}
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
func sessionOpener(pool *pgxpool.Pool, c Config) func(context.Context) (*pgx.Conn, error) {
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
	w.life.Lock()
	if w.state != idle {
		w.life.Unlock()
		return ErrRunAgain
	}
	w.state = running
	w.life.Unlock()
	defer func() {
		w.life.Lock()
		w.state = done
		close(w.stopped)
		w.life.Unlock()
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-w.stopAsked:
			cancel()
		case <-ctx.Done():
		}
	}()
	return w.runUntilDone(ctx)
}

// runState is where a Worker is in its life: Run once, then done.
type runState int

const (
	idle runState = iota
	running
	done
)

// ErrRunAgain is Run's error on a worker that has run or was stopped: a Worker runs once.
var ErrRunAgain = errors.New("taskorch: the worker has run or was stopped; make a new one")

// Stop stops a running worker as a cancellation of Run's context does (what the first SIGTERM
// does): it stops claiming, lets running tasks finish for up to ShutdownGrace, gives the rest
// back. It returns once Run has returned, or, when ctx is done first, cuts the grace short
// (HardStop) and returns ctx's error without waiting more (Stopped tells when Run returns). A
// Stop before Run makes Run return ErrRunAgain at once; a Stop after Run returned does nothing.
func (w *Worker) Stop(ctx context.Context) error {
	w.life.Lock()
	select {
	case <-w.stopAsked:
	default:
		close(w.stopAsked)
	}
	if w.state == idle {
		w.state = done
		close(w.stopped)
	}
	w.life.Unlock()
	select {
	case <-w.stopped:
		return nil
	case <-ctx.Done():
		w.HardStop()
		return ctx.Err()
	}
}

// Stopped returns a channel closed once Run has returned (or Stop was called before Run).
func (w *Worker) Stopped() <-chan struct{} { return w.stopped }

func (w *Worker) runUntilDone(ctx context.Context) error {
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
	handlers := 0
	if w.cfg.Handlers != nil {
		handlers = len(w.cfg.Handlers.Types())
	}
	w.log.Info("worker started", "concurrency", w.cfg.Concurrency, "lease_duration", w.cfg.LeaseDuration,
		"poll_only", w.cfg.PollOnly, "transport", TransportName(w.cfg.Transport), "handlers", handlers, "channels", len(w.cfg.Channels))
	w.fetch(ctx, inner)
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
		r.cancel(tasktype.ErrShutdown)
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

func (w *Worker) runningCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}
