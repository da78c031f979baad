package tasktype

import (
	"errors"
	"fmt"
	"time"
)

// Snooze returns the control error a handler returns to run the task again after d, without
// spending an attempt.
func Snooze(d time.Duration) error {
	if d < 0 {
		d = 0
	}
	return &SnoozeError{Duration: d}
}

// SnoozeError is the error Snooze returns.
type SnoozeError struct{ Duration time.Duration }

func (e *SnoozeError) Error() string { return fmt.Sprintf("taskorch: snooze for %s", e.Duration) }

// Discard wraps err in the control error a handler returns to fail the task for good: it goes
// to failed, with err recorded, and is not retried.
func Discard(err error) error {
	if err == nil {
		err = errors.New("discarded")
	}
	return &DiscardError{Err: err}
}

// DiscardError is the error Discard returns.
type DiscardError struct{ Err error }

func (e *DiscardError) Error() string { return "taskorch: discard: " + e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *DiscardError) Unwrap() error { return e.Err }

// DefaultRateLimitBackoff is how long a task waits after RateLimited without a time of its own.
const DefaultRateLimitBackoff = 2 * time.Second

// RateLimited wraps err in the control error a handler or a channel provider returns when the
// service it called said "slow down" (an HTTP 429, Twilio's 20429, an SMTP 421 or 451): the
// task runs again after retryAfter (0 or less: DefaultRateLimitBackoff) without spending an
// attempt, and a channel task's error handler is not called, so a supervisor's process spends
// no attempt either. err is kept for the log.
func RateLimited(err error, retryAfter time.Duration) error {
	if err == nil {
		err = errors.New("rate limited")
	}
	return &RateLimitedError{Err: err, RetryAfter: retryAfter}
}

// RateLimitedError is the error RateLimited returns.
type RateLimitedError struct {
	Err        error
	RetryAfter time.Duration // as the service said; 0 when it did not
}

func (e *RateLimitedError) Error() string { return "taskorch: rate limited: " + e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *RateLimitedError) Unwrap() error { return e.Err }

// ErrLeaseLost is the cause of a handler's context cancellation when the worker lost the
// task's lease: it was cancelled, or it expired and another worker took it.
var ErrLeaseLost = errors.New("taskorch: the task's lease was lost")

// ErrTaskCancelled is the cause of a handler's context cancellation when the task was cancelled
// (Client.Cancel, queues.cancel_task) while it ran; the worker learns of it within a second
// (docs/worker.md, "Cancellation"). It wraps ErrLeaseLost: a cancelled task's lease is gone, and
// whatever the handler returns is not recorded.
var ErrTaskCancelled = fmt.Errorf("%w: the task was cancelled", ErrLeaseLost)

// ErrShutdown is the cause of a handler's context cancellation when the worker shuts down and
// the grace period is over; the task is given back to pending.
var ErrShutdown = errors.New("taskorch: worker shutting down")

// ErrListenProbe is what Worker.Run returns when the worker's direct LISTEN connection
// (WorkerConfig.ListenConfig) did not receive a NOTIFY sent through its pool: it would never
// wake the worker.
var ErrListenProbe = errors.New("taskorch: the LISTEN connection does not hear the pool's notifications")
