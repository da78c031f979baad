// Package dispatch is a worker's machinery around its transport (docs/transports.md): the
// Dispatcher that sends the ids of due tasks, the Health shared by the dispatcher and the
// fetcher (fall back to PostgreSQL while the transport is down), the hold derived from the
// lease (HoldFor), and Faults, which injects lost, duplicated and delayed messages in tests. The
// transports themselves implement the public interface of package transport.
package dispatch

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch/transport"
)

// HoldFor is the hold a worker gives its transport at Open (transport.OpenOptions.Hold): the
// lease duration plus a margin, so that a redelivery after a worker died finds the task's lease
// expired (and the claim rescues it) rather than still running.
func HoldFor(lease time.Duration) time.Duration {
	return lease + max(lease/10, 2*time.Second)
}

// DB is what the dispatcher needs of a pool.
type DB interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Defaults of DispatcherConfig.
const (
	DefaultBatch           = 500
	DefaultMinWindow       = 100
	DefaultRedispatchAfter = 30 * time.Second
	DefaultRefillInterval  = 2 * time.Millisecond
)

// DispatcherConfig configures a Dispatcher.
type DispatcherConfig struct {
	// Transport is where ids are sent.
	Transport transport.Transport
	// Health is shared with the worker's fetcher: a failed send marks the transport down, and
	// nothing is dispatched while it is down.
	Health *Health
	// TaskTypes limits dispatching and redispatching to these types (nil: all).
	TaskTypes []string
	// Batch is the most ids one pass marks and sends. Defaults to DefaultBatch.
	Batch int
	// MinWindow is the least number of dispatched, unclaimed tasks allowed at once (the window
	// is otherwise twice the live fleet's concurrency; see queues.dispatch_tasks). Defaults to
	// DefaultMinWindow.
	MinWindow int
	// RedispatchAfter: a task dispatched and not claimed within this long is sent again (the
	// reclaimer, every half of it). Defaults to DefaultRedispatchAfter.
	RedispatchAfter time.Duration
	// PollInterval is the shortest wait between passes while idle; it doubles up to
	// MaxPollInterval, and Wake cuts it short.
	PollInterval, MaxPollInterval time.Duration
	// RefillInterval is the shortest time between passes woken by Refill. Defaults to
	// DefaultRefillInterval.
	RefillInterval time.Duration
	// Logger receives send failures and redispatches.
	Logger *slog.Logger
	// OnSent, OnRedispatched and OnSendFailed count messages (nil: not counted).
	OnSent, OnRedispatched, OnSendFailed func(n int)
	// Announce, when set, is called before a pass after which the dispatcher may wait for Wake
	// (the worker's queues.worker_waiting: an enqueue notifies only while a worker says it
	// waits). clear is false when an enqueue was in flight whose task may commit after the pass
	// without a notification: the dispatcher then polls every PollInterval, without backing off,
	// until an announcement is clear.
	Announce func(ctx context.Context) (clear bool, err error)
}

// Dispatcher sends the ids of due pending tasks to a transport (docs/transports.md):
// each pass marks a batch dispatched in one statement (queues.dispatch_tasks, under row locks)
// and sends their ids; a failed send clears the marks (queues.undispatch_tasks), so the tasks
// stay eligible. Its reclaimer sends again what was dispatched but not claimed within
// RedispatchAfter (queues.redispatch_stale, by an index).
//
// Every worker on a transport runs one: the row locks and the dispatch mark keep two dispatchers
// from sending one task in one window, so no leader is needed, and dispatching goes on without
// a pause when a worker (or the leader) dies.
type Dispatcher struct {
	db     DB
	cfg    DispatcherConfig
	wake   chan struct{}
	refill chan struct{}
	all    chan struct{} // RedispatchAll
}

// NewDispatcher returns a Dispatcher over db.
func NewDispatcher(db DB, cfg DispatcherConfig) *Dispatcher {
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.MinWindow <= 0 {
		cfg.MinWindow = DefaultMinWindow
	}

	if cfg.RedispatchAfter <= 0 {
		cfg.RedispatchAfter = DefaultRedispatchAfter
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 100 * time.Millisecond
	}
	if cfg.MaxPollInterval < cfg.PollInterval {
		cfg.MaxPollInterval = max(cfg.PollInterval, 2*time.Second)
	}
	if cfg.RefillInterval <= 0 {
		cfg.RefillInterval = DefaultRefillInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Health == nil {
		cfg.Health = NewHealth()
	}
	return &Dispatcher{db: db, cfg: cfg, wake: make(chan struct{}, 1), refill: make(chan struct{}, 1), all: make(chan struct{}, 1)}
}

// Wake makes the dispatcher run a pass now: tasks were enqueued (a NOTIFY).
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Refill makes the dispatcher run a pass soon: tasks were claimed, there is room in the window.
// Refills are coalesced, at most one pass every RefillInterval: under load, a pass then sends a
// batch rather than the few ids one claim made room for.
func (d *Dispatcher) Refill() {
	select {
	case d.refill <- struct{}{}:
	default:
	}
}

// RedispatchAll makes the next pass send again every task dispatched and not claimed, whatever
// its age: after an outage the transport may have lost them (a Redis restarted without
// persistence). Duplicates are refused at the claim.
func (d *Dispatcher) RedispatchAll() {
	select {
	case d.all <- struct{}{}:
	default:
	}
}

const (
	dispatchSQL   = `select * from queues.dispatch_tasks($1, $2, $3, $4)`
	undispatchSQL = `select queues.undispatch_tasks($1)`
	redispatchSQL = `select * from queues.redispatch_stale($1::interval, $2, $3)`
)

// Run dispatches until ctx is done.
func (d *Dispatcher) Run(ctx context.Context) {
	wait := d.cfg.PollInterval
	reclaimEvery := max(d.cfg.RedispatchAfter/2, 50*time.Millisecond)
	nextReclaim := time.Now().Add(reclaimEvery)
	// Passes are announced (Announce) from a wait until one comes back full; a short pass that
	// was not announced is followed at once by one that is, so the pass before every wait is.
	announce := d.cfg.Announce != nil
	unsure := false
	for ctx.Err() == nil {
		if d.cfg.Health.IsDown() {
			select {
			case <-ctx.Done():
				return
			case <-d.cfg.Health.Up():
			}
			continue
		}
		select {
		case <-d.all:
			d.reclaim(ctx, 0)
		default:
		}
		if !time.Now().Before(nextReclaim) {
			d.reclaim(ctx, d.cfg.RedispatchAfter)
			nextReclaim = time.Now().Add(reclaimEvery)
		}
		passed := time.Now()
		announced := false
		var err error
		if announce {
			var clear bool
			if clear, err = d.cfg.Announce(ctx); err == nil {
				announced, unsure = true, !clear
			}
		}
		n := 0
		if err == nil {
			n, err = d.pass(ctx)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			d.cfg.Logger.Warn("dispatch failed; retrying", "error", err, "retry_in", wait)
		case n == d.cfg.Batch:
			wait, announce = d.cfg.PollInterval, false
			continue // there may be more
		case err == nil && !announced && d.cfg.Announce != nil:
			announce = true
			continue // the backlog is gone: announce, and pass again before waiting
		}
		announce = d.cfg.Announce != nil
		if unsure {
			wait = d.cfg.PollInterval
		}
		timer := time.NewTimer(min(wait, time.Until(nextReclaim)))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-d.wake:
			timer.Stop()
			wait = d.cfg.PollInterval
		case <-d.refill:
			timer.Stop()
			wait = d.cfg.PollInterval
			if gap := d.cfg.RefillInterval - time.Since(passed); gap > 0 {
				select {
				case <-ctx.Done():
					return
				case <-d.wake: // new tasks: at once
				case <-time.After(gap):
				}
			}
		case <-d.all:
			timer.Stop()
			d.RedispatchAll() // handled at the top
		case <-timer.C:
			if n == 0 && !unsure {
				wait = min(wait*2, d.cfg.MaxPollInterval)
			}
		}
	}
}

// pass marks a batch and sends it. It returns how many were marked.
func (d *Dispatcher) pass(ctx context.Context) (int, error) {
	ids, err := d.ids(ctx, dispatchSQL, d.cfg.Transport.Name(), d.cfg.Batch, d.cfg.MinWindow, d.cfg.TaskTypes)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	d.send(ctx, ids, d.cfg.OnSent)
	return len(ids), nil
}

// reclaim sends again what was dispatched more than olderThan ago and is not claimed.
func (d *Dispatcher) reclaim(ctx context.Context, olderThan time.Duration) {
	for ctx.Err() == nil && !d.cfg.Health.IsDown() {
		ids, err := d.ids(ctx, redispatchSQL, olderThan.String(), d.cfg.Batch, d.cfg.TaskTypes)
		if err != nil {
			if ctx.Err() == nil {
				d.cfg.Logger.Warn("redispatch failed; retrying later", "error", err)
			}
			return
		}
		if len(ids) == 0 {
			return
		}
		d.cfg.Logger.Info("sending again tasks dispatched but not claimed", "tasks", len(ids), "older_than", olderThan)
		d.send(ctx, ids, d.cfg.OnRedispatched)
		if len(ids) < d.cfg.Batch {
			return
		}
	}
}

// send sends ids; what could not be sent is made eligible again and the transport marked down.
func (d *Dispatcher) send(ctx context.Context, ids []int64, count func(int)) {
	err := d.cfg.Transport.Send(ctx, ids)
	if err == nil {
		if count != nil {
			count(len(ids))
		}
		return
	}
	failed := transport.Failed(err, ids)
	if count != nil && len(failed) < len(ids) {
		count(len(ids) - len(failed))
	}
	if d.cfg.OnSendFailed != nil {
		d.cfg.OnSendFailed(len(failed))
	}
	// On the worker's own clock: the marks must be cleared even when ctx is done (shutdown).
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	rows, uerr := d.db.Query(uctx, undispatchSQL, failed)
	if uerr == nil {
		rows.Close()
		uerr = rows.Err()
	}
	if uerr != nil {
		d.cfg.Logger.Warn("could not clear the dispatch marks of unsent tasks; the reclaimer will send them",
			"tasks", len(failed), "error", uerr)
	}
	if ctx.Err() == nil {
		d.cfg.Health.MarkDown(err)
	}
}

func (d *Dispatcher) ids(ctx context.Context, sql string, args ...any) ([]int64, error) {
	rows, err := d.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}
