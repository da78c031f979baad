package tasktype

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"
)

// Status is a task's state. docs/design.md draws the states and the transitions between them.
type Status string

// The states of a task.
const (
	// StatusWaiting: waits for its parents (EnqueueOpts.After, docs/workflows.md); never
	// claimed; becomes pending when they have ended, or cancelled when one fails.
	StatusWaiting Status = "waiting"
	// StatusPending: queued; due when RunAt has passed.
	StatusPending Status = "pending"
	// StatusRunning: leased by a worker until LeaseExpiresAt.
	StatusRunning Status = "running"
	// StatusCompleted: done.
	StatusCompleted Status = "completed"
	// StatusFailed: failed for good, without retry (validation failure, unknown type, discarded).
	StatusFailed Status = "failed"
	// StatusDead: attempts exhausted. Retry brings it back by hand.
	StatusDead Status = "dead"
	// StatusCancelled: cancelled.
	StatusCancelled Status = "cancelled"
)

// Statuses lists every status, in lifecycle order.
var Statuses = []Status{StatusWaiting, StatusPending, StatusRunning, StatusCompleted, StatusFailed, StatusDead, StatusCancelled}

// Valid reports whether s is one of the statuses.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// Finished reports whether s is terminal (nothing will run the task again without a retry).
func (s Status) Finished() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusDead || s == StatusCancelled
}

// What failed in a channel task that was completed although its call failed (Task.CallFailure).
const (
	// CallFailureProvider: the provider answered an error.
	CallFailureProvider = "provider_error"
	// CallFailureNoProvider: no provider is configured for the channel on the worker.
	CallFailureNoProvider = "no_provider"
	// CallFailureBeforeHandlerError: the before handler raised an error.
	CallFailureBeforeHandlerError = "before_handler_error"
	// CallFailureBeforeHandlerRefused: the before handler answered a non-success.
	CallFailureBeforeHandlerRefused = "before_handler_refused"
)

// CallFailureLabel is a few words for a call failure reason (Task.CallFailure), as views show
// it: "provider failed", "no provider", "before handler failed", or "call failed".
func CallFailureLabel(reason string) string {
	switch reason {
	case CallFailureProvider:
		return "provider failed"
	case CallFailureNoProvider:
		return "no provider"
	case CallFailureBeforeHandlerError, CallFailureBeforeHandlerRefused:
		return "before handler failed"
	default:
		return "call failed"
	}
}

// Outcome is the task's status as views show it: the status, or for a channel task completed
// although its call failed, "completed · provider failed" (CallFailureLabel).
func (t *Task) Outcome() string {
	if t.CallFailure != nil && t.Status == StatusCompleted {
		return string(t.Status) + " · " + CallFailureLabel(*t.CallFailure)
	}
	return string(t.Status)
}

// Function is the SQL function a db_function task runs, from its payload ("schema.function";
// at most 130 characters), or "" for any other task.
func (t *Task) Function() string {
	if t.Type != TypeDBFunction {
		return ""
	}
	var p struct {
		DBFunction string `json:"db_function"`
	}
	if json.Unmarshal(t.Payload, &p) != nil {
		return ""
	}
	return bound(p.DBFunction, 130)
}

// Label is the task's type as listings show it: the type, and for a db_function task the
// function it runs ("db_function comms.send_email_supervisor").
func (t *Task) Label() string {
	if fn := t.Function(); fn != "" {
		return t.Type + " " + fn
	}
	return t.Type
}

// Task is a row of queues.task: a task's definition and its current state.
//
// Attempt is the number of attempts spent, the running one included: 1 on the first run. A
// failure and a lease that expired spend one (the next run has Attempt+1); a run that ended
// without spending one — a Snooze, a RateLimited return, a task given back at a worker's
// shutdown or from its claim-ahead buffer — gives it back, so the next run has the same number.
// It is what MaxAttempts bounds, not the number of claims (queues.task_lease has one row per
// claim).
type Task struct {
	ID             int64           `json:"task_id"`
	Type           string          `json:"task_type"`
	Payload        json.RawMessage `json:"payload"`
	Priority       int             `json:"priority"`
	IdempotencyKey *string         `json:"idempotency_key,omitempty"`
	ScheduledAt    time.Time       `json:"scheduled_at"`
	EnqueuedAt     time.Time       `json:"enqueued_at"`
	MaxAttempts    int             `json:"max_attempts"`

	Status         Status     `json:"status"`
	RunAt          time.Time  `json:"run_at"`  // next time it may run: ScheduledAt, moved by retry backoff or snooze
	Attempt        int        `json:"attempt"` // attempts spent, the running one included (see Task)
	LeaseID        *int64     `json:"lease_id,omitempty"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at,omitempty"`
	WorkerID       *string    `json:"worker_id,omitempty"`
	LastError      *string    `json:"last_error,omitempty"`
	// CallFailure is set on a channel task (email, sms, file_delete) that was completed although
	// its call failed: what failed, a CallFailure* constant. LastError holds the error. Its
	// supervisor heard of it through its error handler and retries with a new attempt; a view
	// shows it as "completed · provider failed" (see Task.Outcome). nil for every other task.
	CallFailure *string `json:"call_failure,omitempty"`

	ClaimedAt   *time.Time `json:"claimed_at,omitempty"`
	CompletedAt *time.Time `json:"completed_at,omitempty"`
	FailedAt    *time.Time `json:"failed_at,omitempty"`
	DeadAt      *time.Time `json:"dead_at,omitempty"`
	CancelledAt *time.Time `json:"cancelled_at,omitempty"`

	// ParentIDs are the tasks it was enqueued after (EnqueueOpts.After), in id order; nil when
	// none. Client.ParentResults reads their results (docs/workflows.md).
	ParentIDs []int64 `json:"parent_ids,omitempty"`
	// WorkflowID is the workflow the task belongs to: the id of its first task, taken from its
	// parents at enqueue (the smallest of theirs). nil on a task without parents: a workflow's
	// first task is found by its own id (Client.Workflow).
	WorkflowID *int64 `json:"workflow_id,omitempty"`

	// Result is what the task returned, stored with its completion: a Go handler's SetResult or
	// AddHandlerWithResult value, a db_function envelope's "payload". nil when it returned none,
	// and in listings (List leaves it out: results may be large); Get, GetTx and Wait read it.
	Result json.RawMessage `json:"result,omitempty"`
}

// bound makes s printable and bounded: valid UTF-8 without NUL bytes, at most n bytes, cut on a
// rune boundary with a mark.
func bound(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", `\x00`)
	if len(s) <= n {
		return s
	}
	const mark = "…(truncated)"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
