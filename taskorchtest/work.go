package taskorchtest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/kit"
	"github.com/taskorch/taskorch/internal/worker"
	"github.com/taskorch/taskorch/tasktype"
)

// Running one task without a worker: Work runs a task made of args through its handler, in
// memory; WorkTask claims a task of the database, runs it and writes its outcome, on a pool or
// the test's transaction. Both take the task through the worker's own path (the handler's
// options, its timeout, the result slot, what its error means), in the test's goroutine, and
// return what came of it.

// Outcome is what came of a task's run, as Work and WorkTask report it.
type Outcome string

// The outcomes of a run.
const (
	// OutcomeCompleted: the handler returned nil; WorkResult.Result is its result.
	OutcomeCompleted Outcome = "completed"
	// OutcomeFailed: the handler returned an error (or Discard, or panicked, or timed out);
	// WorkResult.Retriable says whether the task would be retried.
	OutcomeFailed Outcome = "failed"
	// OutcomeSnoozed: the handler returned Snooze (or RateLimited); WorkResult.Snooze is for
	// how long.
	OutcomeSnoozed Outcome = "snoozed"
	// OutcomeStopped: ctx ended while the handler ran; a worker would write nothing.
	OutcomeStopped Outcome = "stopped"
)

// WorkResult is what came of one run of a task.
type WorkResult struct {
	// Outcome is what the worker would record (WorkTask: has recorded).
	Outcome Outcome
	// Err is what the handler returned: nil when it succeeded, the Snooze or Discard error it
	// returned, or its error. A panic is an error saying so, with the stack.
	Err error
	// Result is the task's result, set with SetResult (or returned, AddHandlerWithResult), as
	// JSON; nil for none. Set on a completion only.
	Result json.RawMessage
	// Message is a failure's error as the worker records it (Task.LastError): the handler's
	// error, with what the worker adds (a timeout's bound, a panic's stack).
	Message string
	// Retriable reports whether a failure is retried while attempts remain (false for Discard,
	// a payload that does not decode, a result over its bound).
	Retriable bool
	// Snooze is how long a snoozed task waits before it runs again.
	Snooze time.Duration
	// RetryDelay is the delay before a retriable failure's retry that the handler's
	// HandlerOpts.RetryDelay chose; nil when it has none (the database's backoff applies) or no
	// retry follows.
	RetryDelay *time.Duration
	// Task is, for WorkTask, the task as the database holds it after the outcome was written
	// (Status, Attempt, RunAt, LastError, Result); for Work, the task the handler was given.
	Task *taskorch.Task
}

// WorkOpts are the task Work makes for its run. The zero value (or nil) is a first attempt.
type WorkOpts struct {
	// ID is the task's id (Task.ID); 0 by default.
	ID int64
	// Attempt is the attempt the handler sees (Task.Attempt); 0 means 1.
	Attempt int
	// MaxAttempts is the task's max attempts; 0 means the database's default, 25.
	MaxAttempts int
}

// Work runs a task of args through the handler that cfg.Handlers has for its type, as a worker
// with cfg would run it once claimed (the handler's options, cfg's TaskTimeout and
// MaxResultBytes), synchronously, in the calling goroutine, without a database: nothing is
// enqueued and nothing is written. It returns what came of it: the result the handler set, the
// snooze or discard it asked for, the error it returned. The test fails when cfg has no handler
// for the type or args do not marshal.
//
//	res := taskorchtest.Work(ctx, t, &taskorch.WorkerConfig{Handlers: hs}, Charge{OrderID: 7}, nil)
//	require.Equal(t, taskorchtest.OutcomeCompleted, res.Outcome)
//	require.JSONEq(t, `{"receipt": "r-7"}`, string(res.Result))
func Work[T taskorch.TaskArgs](ctx context.Context, tb testing.TB, cfg *taskorch.WorkerConfig, args T, opts *WorkOpts) *WorkResult {
	tb.Helper()
	if opts == nil {
		opts = &WorkOpts{}
	}
	payload, err := json.Marshal(args)
	if err != nil {
		tb.Fatalf("taskorchtest: the task's args do not marshal to JSON: %v", err)
		return nil
	}
	now := time.Now()
	t := &taskorch.Task{
		ID: opts.ID, Type: args.TaskType(), Payload: payload, Status: taskorch.StatusRunning,
		Attempt: max(opts.Attempt, 1), MaxAttempts: opts.MaxAttempts,
		ScheduledAt: now, EnqueuedAt: now, RunAt: now, ClaimedAt: &now,
	}
	if t.MaxAttempts <= 0 {
		t.MaxAttempts = 25
	}
	wc := workerConfig(tb, cfg, t.Type)
	ran, err := worker.RunOne(ctx, wc, t)
	if err != nil {
		tb.Fatalf("taskorchtest: %v", err)
		return nil
	}
	res := result(ran)
	res.Task = t
	return res
}

// WorkTask claims the task taskID of db (a pool, or the test's transaction, which sees the tasks
// the code under test enqueued in it), runs it through the handler that cfg.Handlers has for its
// type as Work does, writes its outcome on db with the worker's own statements (queues.
// complete_tasks_with_results, fail_task, snooze_task), and returns what came of it, with the
// task as it is then. The claim is a worker's, with cfg's LeaseDuration, under the worker id
// "taskorchtest": the attempt counts, and a task over its attempts ends dead.
//
// The test fails when the task cannot be claimed (it does not exist, is not pending, is not due
// yet, its queue is paused or its limit full), cfg has no handler for its type, or the outcome
// cannot be written. A run stopped by ctx writes nothing: the task stays claimed until its lease
// expires.
func WorkTask(ctx context.Context, tb testing.TB, cfg *taskorch.WorkerConfig, db taskorch.DBTX, taskID int64) *WorkResult {
	tb.Helper()
	wc, err := kit.WorkerConfig(cfg)
	if err != nil {
		tb.Fatalf("taskorchtest: the worker's configuration: %v", err)
		return nil
	}
	if before, err := readTask(ctx, db, taskID); err == nil {
		wc = workerConfig(tb, cfg, before.Type) // no handler: fail before claiming it
	}
	t, err := worker.ClaimOne(ctx, db, "taskorchtest", taskID, wc.LeaseDuration)
	if err != nil {
		tb.Fatalf("taskorchtest: claim task %d: %v", taskID, err)
		return nil
	}
	wc = workerConfig(tb, cfg, t.Type)
	ran, err := worker.RunOne(ctx, wc, t)
	if err != nil {
		tb.Fatalf("taskorchtest: %v", err)
		return nil
	}
	res := result(ran)
	if ran.Outcome != tasktype.OutcomeStopped {
		if _, err := worker.WriteOutcome(context.WithoutCancel(ctx), db, t, ran); err != nil {
			tb.Fatalf("taskorchtest: write the outcome of task %d (%s): %v", taskID, res.Outcome, err)
			return nil
		}
	}
	res.Task, err = readTask(context.WithoutCancel(ctx), db, taskID)
	if err != nil {
		tb.Fatalf("taskorchtest: %v", err)
		return nil
	}
	return res
}

// workerConfig is the worker configuration NewWorker makes of cfg, with the test's log for a
// Logger left nil; the test fails when cfg has no handler for typ or is invalid.
func workerConfig(tb testing.TB, cfg *taskorch.WorkerConfig, typ string) worker.Config {
	tb.Helper()
	c := taskorch.WorkerConfig{}
	if cfg != nil {
		c = *cfg
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if !slices.Contains(c.Handlers.Types(), typ) {
		tb.Fatalf("taskorchtest: the WorkerConfig has no handler for task type %q (it has %v)", typ, c.Handlers.Types())
	}
	wc, err := kit.WorkerConfig(&c)
	if err != nil {
		tb.Fatalf("taskorchtest: the worker's configuration: %v", err)
	}
	return wc
}

// result is the WorkResult of ran, without its task.
func result(ran *worker.Ran) *WorkResult {
	res := &WorkResult{Err: ran.Err, Result: ran.Result, Message: ran.Message, Retriable: ran.Retriable, Snooze: ran.Snooze,
		RetryDelay: ran.RetryDelay}
	switch ran.Outcome {
	case tasktype.OutcomeCompleted:
		res.Outcome = OutcomeCompleted
	case tasktype.OutcomeFailed:
		res.Outcome = OutcomeFailed
	case tasktype.OutcomeSnoozed:
		res.Outcome = OutcomeSnoozed
	default:
		res.Outcome = OutcomeStopped
	}
	return res
}

// readTask reads task id, with its result, from db.
func readTask(ctx context.Context, db taskorch.DBTX, id int64) (*taskorch.Task, error) {
	var t taskorch.Task
	var payload, result []byte
	err := db.QueryRow(ctx, `select task_id, task_type, payload, priority, idempotency_key, scheduled_at, enqueued_at,
		max_attempts, status::text, run_at, attempt, lease_id, lease_expires_at, worker_id, last_error,
		claimed_at, completed_at, failed_at, dead_at, cancelled_at, result
		from queues.task where task_id = $1`, id).Scan(&t.ID, &t.Type, &payload, &t.Priority, &t.IdempotencyKey, &t.ScheduledAt,
		&t.EnqueuedAt, &t.MaxAttempts, &t.Status, &t.RunAt, &t.Attempt, &t.LeaseID, &t.LeaseExpiresAt, &t.WorkerID, &t.LastError,
		&t.ClaimedAt, &t.CompletedAt, &t.FailedAt, &t.DeadAt, &t.CancelledAt, &result)
	if err != nil {
		return nil, fmt.Errorf("read task %d: %w", id, err)
	}
	t.Payload, t.Result = payload, result
	return &t, nil
}

// HandlerResult is the result a handler set with SetResult under a HandlerContext.
type HandlerResult struct{ slot *worker.ResultSlot }

// HandlerContext returns ctx made a Go handler's context as far as taskorch.SetResult is
// concerned, and what the handler sets there: for a unit test that calls a handler function
// itself, with a task it made (outside a worker, SetResult returns an error matching
// ErrInvalidInput). maxResultBytes bounds the result as WorkerConfig.MaxResultBytes does (0:
// 1 MiB, the default; negative: no bound).
//
//	ctx, res := taskorchtest.HandlerContext(t.Context(), 0)
//	err := charge(ctx, &taskorch.TaskFor[Charge]{Task: &taskorch.Task{Attempt: 1}, Args: Charge{OrderID: 7}})
//	require.NoError(t, err)
//	require.JSONEq(t, `{"receipt": "r-7"}`, string(res.Value()))
func HandlerContext(ctx context.Context, maxResultBytes int) (context.Context, *HandlerResult) {
	if maxResultBytes == 0 {
		maxResultBytes = 1 << 20
	}
	ctx, s := worker.NewResultSlot(ctx, maxResultBytes)
	return ctx, &HandlerResult{slot: s}
}

// Value returns the result set last, as JSON; nil when none was set (or it was cleared).
func (r *HandlerResult) Value() json.RawMessage {
	v, _ := r.slot.Value()
	return v
}

// Decode decodes the result set last into v; an error when none was set.
func (r *HandlerResult) Decode(v any) error {
	b := r.Value()
	if b == nil {
		return fmt.Errorf("taskorchtest: the handler set no result")
	}
	return json.Unmarshal(b, v)
}

// Over returns the message the task would fail with when the last result the handler gave was
// over the bound (SetResult refused it), "" otherwise.
func (r *HandlerResult) Over() string {
	_, over := r.slot.Value()
	return over
}
