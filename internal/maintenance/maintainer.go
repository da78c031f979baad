package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// shutdownTimeout bounds resigning and deregistering once Run's context is done.
const shutdownTimeout = 5 * time.Second

// Maintainer registers a worker, keeps it alive and, when it is the leader, does the leader's
// work. Create it with New and start it with Run.
type Maintainer struct {
	pool *pgxpool.Pool
	cfg  Config
	log  *slog.Logger
	// instance names this process in queues.worker: another process under the same worker id
	// takes the id over only once this one is gone.
	instance string

	running    atomic.Bool
	registered atomic.Bool
	// reaped is set when the worker found its row gone, until it has registered again: a
	// registration that fails is retried by the next tick, still as a re-registration.
	reaped atomic.Bool
	// everRegistered is set by the first registration: any later one is a registration again
	// (EventRegistered's Reregistered), whichever path makes it.
	everRegistered atomic.Bool
	leader         leaderState

	sessionOff   atomic.Bool   // the session went through a transaction pooler: heartbeats alone
	sessionReset chan struct{} // the heartbeat found the row gone: register on a new session
	leaderWake   chan struct{} // registered, or lost the session: try the leadership now

	// badCrons remembers the schedules whose cron expression failed to parse, so that each is
	// logged once rather than every ScheduleInterval.
	badCronsMu sync.Mutex
	badCrons   map[string]string
}

// New returns a Maintainer for the worker cfg describes, on pool. It fails when cfg is invalid.
func New(pool *pgxpool.Pool, cfg Config) (*Maintainer, error) {
	if pool == nil {
		return nil, errors.New("maintenance: New: pool is nil")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Maintainer{
		pool:         pool,
		cfg:          cfg,
		log:          cfg.Logger.With(slog.String("worker_id", cfg.WorkerID)),
		instance:     newInstance(),
		sessionReset: make(chan struct{}, 1),
		leaderWake:   make(chan struct{}, 1),
		badCrons:     map[string]string{},
	}, nil
}

// WorkerID returns the worker's id, as given in Config or generated.
func (m *Maintainer) WorkerID() string { return m.cfg.WorkerID }

// Run registers the worker (on its session, when Config.Session is set) and runs until ctx is
// done: a heartbeat every HeartbeatInterval (registering again when a leader reaped the
// worker), an attempt at the leader lease every LeaderPollInterval (renewed every LeaderTTL/3
// while leading), and while leader, recovering the tasks of dead workers, pruning and
// scheduling at their intervals. Database errors are logged and retried, so Run outlives a
// database restart. When ctx is done it resigns the leadership, deregisters the worker (bounded
// by 5 seconds), closes the session and returns nil. It may be called once.
func (m *Maintainer) Run(ctx context.Context) error {
	if !m.running.CompareAndSwap(false, true) {
		return errors.New("maintenance: Run called twice")
	}
	// The session outlives ctx until the worker is deregistered.
	hold, release := context.WithCancel(context.WithoutCancel(ctx))
	defer release()
	var session sync.WaitGroup
	if m.cfg.Session != nil {
		session.Go(func() { m.runSession(ctx, hold) })
	}
	var wg sync.WaitGroup
	wg.Go(func() { m.runHeartbeats(ctx) })
	wg.Go(func() { m.runLeadership(ctx) })
	wg.Go(func() { m.runReaper(ctx) })
	wg.Go(func() { m.runSessionReaper(ctx) })
	wg.Go(func() { m.runRetention(ctx) })
	wg.Go(func() { m.runScheduler(ctx) })
	wg.Wait()

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	m.resign(sctx)
	m.deregister(sctx)
	release()
	session.Wait()
	return nil
}

// emit passes e to Config.OnEvent.
func (m *Maintainer) emit(e Event) {
	if m.cfg.OnEvent != nil {
		m.cfg.OnEvent(e)
	}
}

// fail logs a failed operation and emits EventError, unless ctx is done (shutting down).
func (m *Maintainer) fail(ctx context.Context, op string, err error) {
	if ctx.Err() != nil {
		return
	}
	m.log.Warn("maintenance: "+op+" failed; retrying", slog.String("op", op), slog.Any("error", err))
	m.emit(Event{Kind: EventError, Op: op, Err: err})
}

// minCallTimeout is the least time one maintenance call gets before it is abandoned, however
// short the interval it runs at. An abandoned call closes its connection, so the next call runs
// on a new one, whose first statements are the slowest (the new backend loads its catalog caches
// and compiles the functions it calls): with a budget below their cost, every call would be
// abandoned and the worker would never register. A call that takes longer than its interval
// delays the next one instead.
const minCallTimeout = 5 * time.Second

// callTimeout is the time one call made every interval gets: interval, at least minCallTimeout.
func callTimeout(interval time.Duration) time.Duration { return max(interval, minCallTimeout) }

// every calls fn at once and then every interval until ctx is done. A call that takes longer
// than interval delays the next one; calls never overlap.
func every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for ctx.Err() == nil {
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
