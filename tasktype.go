package taskorch

import (
	"time"

	"github.com/taskorch/taskorch/tasktype"
)

// The names of package tasktype, re-exported: the types that this package and the worker's
// machinery share live there (a leaf package, so that neither imports the other's internals),
// and programs use them under these names.

// Task is a row of queues.task: a task's definition and its current state.
type Task = tasktype.Task

// Status is a task's state. docs/design.md draws the states and the transitions between them.
type Status = tasktype.Status

// The states of a task.
const (
	// StatusWaiting: waits for its parents (EnqueueOpts.After, docs/workflows.md); never
	// claimed; becomes pending when they have ended, or cancelled when one fails.
	StatusWaiting = tasktype.StatusWaiting
	// StatusPending: queued; due when RunAt has passed.
	StatusPending = tasktype.StatusPending
	// StatusRunning: leased by a worker until LeaseExpiresAt.
	StatusRunning = tasktype.StatusRunning
	// StatusCompleted: done.
	StatusCompleted = tasktype.StatusCompleted
	// StatusFailed: failed for good, without retry (validation failure, unknown type, discarded).
	StatusFailed = tasktype.StatusFailed
	// StatusDead: attempts exhausted. Retry brings it back by hand.
	StatusDead = tasktype.StatusDead
	// StatusCancelled: cancelled.
	StatusCancelled = tasktype.StatusCancelled
)

// Statuses lists every status, in lifecycle order.
var Statuses = tasktype.Statuses

// What failed in a channel task that was completed although its call failed (Task.CallFailure).
const (
	// CallFailureProvider: the provider answered an error.
	CallFailureProvider = tasktype.CallFailureProvider
	// CallFailureNoProvider: no provider is configured for the channel on the worker.
	CallFailureNoProvider = tasktype.CallFailureNoProvider
	// CallFailureBeforeHandlerError: the before handler raised an error.
	CallFailureBeforeHandlerError = tasktype.CallFailureBeforeHandlerError
	// CallFailureBeforeHandlerRefused: the before handler answered a non-success.
	CallFailureBeforeHandlerRefused = tasktype.CallFailureBeforeHandlerRefused
)

// CallFailureLabel is a few words for a call failure reason (Task.CallFailure), as views show
// it: "provider failed", "no provider", "before handler failed", or "call failed".
func CallFailureLabel(reason string) string { return tasktype.CallFailureLabel(reason) }

// Handler runs tasks of one type (see tasktype.Handler). Work returns nil when the task is done,
// an error to fail the attempt, or a control error: Snooze or Discard.
type Handler = tasktype.Handler

// HandlerFunc adapts a function to a Handler: the untyped form, for payloads a handler reads as
// raw JSON (the SQL-first world).
type HandlerFunc = tasktype.HandlerFunc

// Middleware wraps every Go handler of a worker (WorkerConfig.Middleware; see
// tasktype.Middleware).
type Middleware = tasktype.Middleware

// HandlerOpts are the options of one task type's handler, given when it is registered (Handle,
// HandleFunc, AddHandler): a timeout, a cap on attempts, a retry delay (see tasktype.HandlerOpts).
type HandlerOpts = tasktype.HandlerOpts

// Snooze returns the control error a handler returns to run the task again after d, without
// spending an attempt.
func Snooze(d time.Duration) error { return tasktype.Snooze(d) }

// SnoozeError is the error Snooze returns.
type SnoozeError = tasktype.SnoozeError

// Discard wraps err in the control error a handler returns to fail the task for good: it goes
// to failed, with err recorded, and is not retried.
func Discard(err error) error { return tasktype.Discard(err) }

// DiscardError is the error Discard returns.
type DiscardError = tasktype.DiscardError

// DefaultRateLimitBackoff is how long a task waits after RateLimited without a time of its own.
const DefaultRateLimitBackoff = tasktype.DefaultRateLimitBackoff

// RateLimited wraps err in the control error a handler or a channel provider returns when the
// service it called said "slow down" (an HTTP 429, Twilio's 20429, an SMTP 421 or 451): the
// task runs again after retryAfter (0 or less: DefaultRateLimitBackoff) without spending an
// attempt, and a channel task's error handler is not called, so a supervisor's process spends
// no attempt either. err is kept for the log.
func RateLimited(err error, retryAfter time.Duration) error {
	return tasktype.RateLimited(err, retryAfter)
}

// RateLimitedError is the error RateLimited returns.
type RateLimitedError = tasktype.RateLimitedError

// The causes of a handler's context cancellation (context.Cause), and the worker's own errors.
var (
	// ErrLeaseLost: the worker lost the task's lease: it was cancelled, or it expired and
	// another worker took it.
	ErrLeaseLost = tasktype.ErrLeaseLost
	// ErrTaskCancelled: the task was cancelled (Client.Cancel, queues.cancel_task) while it ran;
	// the worker learns of it within a second (docs/worker.md, "Cancellation"). It wraps
	// ErrLeaseLost.
	ErrTaskCancelled = tasktype.ErrTaskCancelled
	// ErrShutdown: the worker shuts down and the grace period is over; the task is given back
	// to pending.
	ErrShutdown = tasktype.ErrShutdown
	// ErrListenProbe: a worker's direct LISTEN connection (WorkerConfig.ListenConfig) did not
	// receive a NOTIFY sent through its pool, so it would never wake the worker.
	ErrListenProbe = tasktype.ErrListenProbe
)

// TypeDBFunction is the task type whose payload names a SQL function to run:
// {"db_function": "schema.function", ...}. The function gets the whole payload.
const TypeDBFunction = tasktype.TypeDBFunction

// The channel task types: one provider call each, wrapped in before/success/error handlers.
const (
	TypeEmail      = tasktype.TypeEmail
	TypeSMS        = tasktype.TypeSMS
	TypeFileDelete = tasktype.TypeFileDelete
)

// ChannelTypes lists the channel task types.
var ChannelTypes = tasktype.ChannelTypes

// ChannelProvider makes a channel task's one provider call (send an email, an SMS, delete a
// file); see tasktype.ChannelProvider. Return Discard(err) for a failure retrying cannot fix.
type ChannelProvider = tasktype.ChannelProvider

// ChannelProviderFunc adapts a function to a ChannelProvider.
type ChannelProviderFunc = tasktype.ChannelProviderFunc

// ChannelCall is one provider call.
type ChannelCall = tasktype.ChannelCall

// Observer watches a worker: the tasks it runs (each told once its outcome is committed) and
// what happens to it. Give observers in WorkerConfig.Observers; contrib/prometheus and
// contrib/otel are two (see tasktype.Observer for the methods, and tasktype.ObserverDefaults to
// implement only some).
type Observer = tasktype.Observer
