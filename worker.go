package taskorch

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch/internal/worker"
)

// Worker claims tasks from PostgreSQL and runs them: db_function tasks through
// internal.run_function, channel tasks through their providers with the before/success/error
// handler protocol, and everything else through Go handlers registered by type.
//
// Several workers, in one process or on many machines, can share one database: a task is
// claimed by one worker at a time under a lease, and only that lease can record its outcome.
// How a task is run, from its claim to its outcome, is package internal/worker
// (docs/worker.md).
type Worker struct {
	w *worker.Worker
}

// NewWorker returns a worker over pool. The pool should allow Concurrency + 4 connections: a
// db_function task holds one for its transaction, and the fetcher, the completer, the lease
// renewer (or the lease check) and the listener use one each. The worker's session
// (WorkerConfig.SessionGrace) is one more connection, taken out of the pool.
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
	w, err := worker.New(pool, c.workerConfig())
	if err != nil {
		return nil, &InputError{Msg: err.Error()}
	}
	return &Worker{w: w}, nil
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.w.ID() }

// IsLeader reports whether this worker currently holds the leader lease.
func (w *Worker) IsLeader() bool { return w.w.IsLeader() }

// AddBackground registers a function the worker runs in its own goroutine from Run until it
// stops; its context is cancelled after the running tasks are finished or given back. Call it
// before Run.
func (w *Worker) AddBackground(fn func(ctx context.Context)) { w.w.AddBackground(fn) }

// Run claims and runs tasks until ctx is done or Stop is called, then shuts down gracefully: it
// stops claiming, lets running tasks finish for up to ShutdownGrace, cancels the rest, writes
// the outcomes it has, gives back to pending every task the database says this worker still
// holds (their attempt not spent), and returns. HardStop cuts the grace period short.
//
// Run does not own the pool: it never closes it. Before it returns, it releases every connection
// it acquired, and closes the two it took out of the pool for good (its session and its LISTEN
// connection, unless ListenConfig or PollOnly say otherwise). Close the pool after Run has
// returned (Stopped), never before: the shutdown writes outcomes and gives tasks back through
// it. A Worker runs once: Run again, or after Stop, returns ErrRunAgain.
func (w *Worker) Run(ctx context.Context) error { return w.w.Run(ctx) }

// ErrRunAgain is Run's error on a Worker that has run or was stopped: make a new one.
var ErrRunAgain = worker.ErrRunAgain

// Stop stops the worker gracefully, as the cancellation of Run's context does (what the first
// SIGTERM does to `taskorch worker`): it stops claiming, lets running tasks finish for up to
// ShutdownGrace, and gives the rest back to pending. It returns nil once Run has returned. If
// ctx is done first, Stop cuts the grace short (HardStop: the running tasks are cancelled and
// given back) and returns ctx's error without waiting for Run; Stopped says when it returns.
// Stop before Run keeps Run from starting; Stop after Run returned does nothing. It is safe to
// call from any goroutine, more than once.
func (w *Worker) Stop(ctx context.Context) error { return w.w.Stop(ctx) }

// Stopped returns a channel that is closed once Run has returned (or Stop was called before
// Run): the worker holds no task and no connection any more, and its pool may be closed.
func (w *Worker) Stopped() <-chan struct{} { return w.w.Stopped() }

// HardStop makes a stopping worker cancel its running tasks at once instead of waiting out
// ShutdownGrace (a second Ctrl-C). They are given back to pending.
func (w *Worker) HardStop() { w.w.HardStop() }
