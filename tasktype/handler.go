package tasktype

import (
	"context"
	"time"
)

// Handler runs tasks of one type. Work returns nil when the task is done, an error to fail the
// attempt (it is retried with backoff while attempts remain), or a control error: Snooze (run
// again later without spending an attempt) or Discard (fail for good, no retry).
//
// ctx is cancelled when the task times out, when the worker loses the task's lease (it was
// cancelled, or it expired and was taken over) and when the worker shuts down; handlers should
// return promptly then.
type Handler interface {
	Work(ctx context.Context, t *Task) error
}

// HandlerFunc adapts a function to a Handler: the untyped form, for payloads a handler reads as
// raw JSON (the SQL-first world).
type HandlerFunc func(ctx context.Context, t *Task) error

// Work calls f.
func (f HandlerFunc) Work(ctx context.Context, t *Task) error { return f(ctx, t) }

// Middleware wraps a Go handler: it returns a Handler that does its own work around next's
// (WorkerConfig.Middleware). It sees the task, may pass next a context of its own (a logger,
// a span, a tenant), and may change what next returned or recover its panic. It runs inside
// the attempt: its context is the task's, with the attempt's timeout, cancelled as the task is.
type Middleware func(next Handler) Handler

// HandlerOpts are the options of one task type's handler, given when it is registered (Handle,
// HandleFunc, AddHandler). The zero value, like a nil *HandlerOpts, means the worker's defaults.
//
//	taskorch.AddHandler(hs, sendReport, &taskorch.HandlerOpts{
//		Timeout:     time.Minute,
//		MaxAttempts: 5,
//		RetryDelay:  func(attempt int, err error) time.Duration { return time.Duration(attempt) * 10 * time.Second },
//	})
type HandlerOpts struct {
	// Timeout bounds one attempt of this type's tasks, in place of WorkerConfig.TaskTimeout:
	// when it passes, the handler's context is cancelled and the attempt fails (and is retried,
	// as any failure). Zero means the worker's TaskTimeout; negative means no bound for this
	// type, whatever the worker's (the lease still renews while the handler runs).
	Timeout time.Duration

	// WarnAfter: an attempt of this type still running after WarnAfter is logged as a warning,
	// once ("task running longer than expected", with its id and how long it has run), and
	// reported to the observers (taskorch_tasks_running_long_total): a stuck handler shows
	// before its lease or timeout ends it. Zero means the worker's WarnRunningAfter; negative
	// means no warning for this type.
	WarnAfter time.Duration

	// MaxAttempts caps the attempts of this type's tasks, below each task's own max attempts
	// (EnqueueOpts.MaxAttempts): a retriable failure of attempt MaxAttempts or later ends the
	// task dead, as running out of its own attempts does. A task claimed past the cap (an
	// earlier attempt's lease expired) ends dead without running. Zero means no cap: the task's
	// own max attempts alone.
	MaxAttempts int

	// RetryDelay, when set, decides how long after a retriable failure of this type the task is
	// run again, in place of the database's exponential backoff (queues.retry_delay). attempt is
	// the attempt that failed (1 for the first run) and err what the handler returned (a
	// timeout's error names the timeout; a panic's, the panic). A negative delay means at once.
	// It is not called when no attempt remains. It must be safe for concurrent use; if it
	// panics, the database's backoff applies.
	RetryDelay func(attempt int, err error) time.Duration
}
