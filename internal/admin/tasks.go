package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrInvalidInput is wrapped by the errors of this package's operator actions for bad input (a
// filter without a condition, a status the action does not take, a blank schedule name, ...):
// the database refused it (SQLSTATE 22023) or it was caught before, and nothing was written.
var ErrInvalidInput = errors.New("invalid input")

// TaskAction is what an operator does to tasks: retry, cancel or delete them.
type TaskAction string

// The actions, and the statuses each takes a task from (docs/operations.md, "Runbook").
const (
	// ActionRetry puts dead, failed and cancelled tasks back to pending, due now, attempts reset
	// (by id, a pending task is made due now).
	ActionRetry TaskAction = "retry"
	// ActionCancel cancels waiting, pending, running, failed and dead tasks; a running task's worker is
	// told at commit.
	ActionCancel TaskAction = "cancel"
	// ActionDelete deletes finished tasks (completed, failed, dead, cancelled) with their error
	// rows, never a pending or running one; their lease and event history stays until the
	// leader drops its day, with a deleted event naming the actor.
	ActionDelete TaskAction = "delete"
)

// Valid reports whether a is one of the actions.
func (a TaskAction) Valid() bool { return a == ActionRetry || a == ActionCancel || a == ActionDelete }

// Statuses returns the statuses a task is taken from by a filter's action.
func (a TaskAction) Statuses() []string {
	switch a {
	case ActionRetry:
		return []string{"dead", "failed", "cancelled"}
	case ActionCancel:
		return []string{"waiting", "pending", "running", "failed", "dead"}
	case ActionDelete:
		return []string{"completed", "failed", "dead", "cancelled"}
	}
	return nil
}

// The outcomes of an action on a task named by id (TaskOutcome.Outcome).
const (
	OutcomeDone       = "done"
	OutcomeUnchanged  = "unchanged"   // cancelling a cancelled task
	OutcomeNotFound   = "not_found"   // no such task (or deleted, pruned)
	OutcomeWrongState = "wrong_state" // its status forbids the action
	OutcomeBusy       = "busy"        // another transaction held its row: try again
	OutcomeConflict   = "conflict"    // retry: a pending task holds its debounce key
)

// TaskOutcome is what became of one task named by id.
type TaskOutcome struct {
	TaskID  int64   `json:"task_id"`
	Outcome string  `json:"outcome"`
	Status  *string `json:"status,omitempty"` // its status now; nil when it does not exist
}

// maxIDsPerCall is how many ids one call of queues.<action>_tasks takes.
const maxIDsPerCall = 1000

// ActOnTaskIDs applies action to the tasks named by ids, up to 1,000 a statement (each its own
// short transaction), recording actor (empty: the database role) and, for a cancel, reason.
// It returns one outcome per distinct id, in id order. A task another transaction holds is
// never waited for: it is tried again a few times over about two seconds (its holder is
// recording an outcome or renewing a lease, which takes milliseconds), then reported
// OutcomeBusy.
func ActOnTaskIDs(ctx context.Context, db DB, action TaskAction, ids []int64, actor, reason string) ([]TaskOutcome, error) {
	if !action.Valid() {
		return nil, fmt.Errorf("%w: unknown action %q", ErrInvalidInput, action)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: no task id given", ErrInvalidInput)
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := make(map[int64]TaskOutcome, len(ids))
	pause := 20 * time.Millisecond
	for round := 0; ; round++ {
		var busy []int64
		for chunk := range slices.Chunk(ids, maxIDsPerCall) {
			got, err := actOnIDs(ctx, db, action, chunk, actor, reason)
			if err != nil {
				return sortedOutcomes(out), err
			}
			for _, o := range got {
				out[o.TaskID] = o
				if o.Outcome == OutcomeBusy {
					busy = append(busy, o.TaskID)
				}
			}
		}
		if len(busy) == 0 || round == 8 {
			return sortedOutcomes(out), nil
		}
		select {
		case <-ctx.Done():
			return sortedOutcomes(out), ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 400*time.Millisecond)
		ids = busy
	}
}

func actOnIDs(ctx context.Context, db DB, action TaskAction, ids []int64, actor, reason string) ([]TaskOutcome, error) {
	var rows pgx.Rows
	var err error
	if action == ActionCancel {
		rows, err = db.Query(ctx, `select task_id, outcome, status::text from queues.cancel_tasks($1, $2, $3)`,
			ids, nullIfEmpty(actor), nullIfEmpty(reason))
	} else {
		rows, err = db.Query(ctx, `select task_id, outcome, status::text from queues.`+string(action)+`_tasks($1, $2)`,
			ids, nullIfEmpty(actor))
	}
	if err != nil {
		return nil, actionError(string(action)+" tasks", err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[TaskOutcome])
	if err != nil {
		return nil, actionError(string(action)+" tasks", err)
	}
	return got, nil
}

func sortedOutcomes(m map[int64]TaskOutcome) []TaskOutcome {
	out := make([]TaskOutcome, 0, len(m))
	for _, o := range m {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b TaskOutcome) int { return cmp.Compare(a.TaskID, b.TaskID) })
	return out
}

// TaskFilter selects tasks for a bulk action, as queues.<action>_tasks_matching takes it. Empty
// fields do not filter; at least one must be set. Times: Since inclusive, Until exclusive.
type TaskFilter struct {
	Statuses       []string  `json:"statuses,omitempty"` // among the action's (TaskAction.Statuses); empty: all of those
	Types          []string  `json:"task_types,omitempty"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	EnqueuedSince  time.Time `json:"enqueued_since,omitzero"`
	EnqueuedUntil  time.Time `json:"enqueued_until,omitzero"`
	// FinishedSince and FinishedUntil bound when a task finished: went dead or failed, was
	// cancelled or completed. Only finished tasks match them.
	FinishedSince time.Time `json:"finished_since,omitzero"`
	FinishedUntil time.Time `json:"finished_until,omitzero"`
}

func (f TaskFilter) args() []any {
	t := func(v time.Time) any {
		if v.IsZero() {
			return nil
		}
		return v
	}
	var statuses, types any
	if len(f.Statuses) > 0 {
		statuses = f.Statuses
	}
	if len(f.Types) > 0 {
		types = f.Types
	}
	return []any{statuses, types, nullIfEmpty(f.IdempotencyKey), t(f.EnqueuedSince), t(f.EnqueuedUntil), t(f.FinishedSince), t(f.FinishedUntil)}
}

// CountMatching returns how many tasks action would act on with filter f now (a dry run). It
// reads, locks nothing (queues.count_tasks_matching).
func CountMatching(ctx context.Context, db DB, action TaskAction, f TaskFilter) (int64, error) {
	if !action.Valid() {
		return 0, fmt.Errorf("%w: unknown action %q", ErrInvalidInput, action)
	}
	var n int64
	err := db.QueryRow(ctx, `select queues.count_tasks_matching($1, $2::text[]::queues.task_status[], $3, $4, $5, $6, $7, $8)`,
		append([]any{string(action)}, f.args()...)...).Scan(&n)
	if err != nil {
		return 0, actionError("count tasks", err)
	}
	return n, nil
}

// BulkResult is what a bulk action did.
type BulkResult struct {
	Matched int64 `json:"matched"` // tasks the filter matched, batch by batch
	Done    int64 `json:"done"`    // acted on
	Skipped int64 `json:"skipped"` // matched but not acted on: their row was locked, or they changed meanwhile
	Batches int   `json:"batches"`
	// Complete is false when the loop stopped before the filter's last task (ctx done): running
	// it again goes on (the tasks acted on no longer match, except a cancel's or a delete's
	// skipped ones).
	Complete   bool  `json:"complete"`
	LastTaskID int64 `json:"last_task_id,omitempty"` // the cursor where it stopped
}

// DefaultBatch is how many tasks one statement of a bulk action takes by default.
const DefaultBatch = 500

// ActOnMatching applies action to every task filter f matches, in batches of batch tasks (0:
// DefaultBatch; at most 1,000) in id order, each batch one statement in its own transaction that
// locks its tasks with SKIP LOCKED and never waits. It records actor (empty: the database role)
// and, for a cancel, reason. progress, when not nil, is called after each batch. When ctx is done
// between batches it returns what it did, Complete false, and ctx's error.
func ActOnMatching(ctx context.Context, db DB, action TaskAction, f TaskFilter, actor, reason string, batch int,
	progress func(BulkResult)) (BulkResult, error) {
	var res BulkResult
	if !action.Valid() {
		return res, fmt.Errorf("%w: unknown action %q", ErrInvalidInput, action)
	}
	if batch == 0 {
		batch = DefaultBatch
	}
	sql := `select matched, done, skipped, last_task_id from queues.` + string(action) +
		`_tasks_matching($1::text[]::queues.task_status[], $2, $3, $4, $5, $6, $7, _after_task_id => $8, _batch => $9, _actor => $10`
	if action == ActionCancel {
		sql += `, _reason => $11)`
	} else {
		sql += `)`
	}
	for {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("%s tasks: stopped after %d batches: %w", action, res.Batches, err)
		}
		args := append(f.args(), res.LastTaskID, batch, nullIfEmpty(actor))
		if action == ActionCancel {
			args = append(args, nullIfEmpty(reason))
		}
		var matched, done, skipped int
		var last *int64
		if err := db.QueryRow(ctx, sql, args...).Scan(&matched, &done, &skipped, &last); err != nil {
			return res, actionError(string(action)+" tasks", err)
		}
		res.Batches++
		res.Matched += int64(matched)
		res.Done += int64(done)
		res.Skipped += int64(skipped)
		if last != nil {
			res.LastTaskID = *last
		}
		if matched < batch {
			res.Complete = true
		}
		if progress != nil {
			progress(res)
		}
		if res.Complete {
			return res, nil
		}
	}
}

// RunningTask is a running task, as RunningLongest lists it.
type RunningTask struct {
	ID             int64      `json:"task_id"`
	Type           string     `json:"task_type"`
	Function       *string    `json:"db_function,omitempty"` // a db_function task's function
	WorkerID       *string    `json:"worker_id"`
	Attempt        int        `json:"attempt"`
	MaxAttempts    int        `json:"max_attempts"`
	ClaimedAt      *time.Time `json:"claimed_at"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at"`
	// RunningSeconds is how long it has run in this attempt, by the database's clock.
	RunningSeconds float64 `json:"running_seconds"`
}

// RunningLongest returns the running tasks that have run longest in their current attempt
// (claimed first), at most limit (1 to 10,000), of the given types (none: all). It reads the
// running tasks only (queues.task: an operator's role needs SELECT on it).
func RunningLongest(ctx context.Context, db DB, limit int, types []string) ([]RunningTask, error) {
	if limit < 1 || limit > 10000 {
		return nil, fmt.Errorf("%w: limit must be between 1 and 10000, got %d", ErrInvalidInput, limit)
	}
	var typeArg any
	if len(types) > 0 {
		typeArg = types
	}
	rows, err := db.Query(ctx, `
		select t.task_id, t.task_type, case when t.task_type = 'db_function' then left(t.payload ->> 'db_function', 130) end,
		       t.worker_id, t.attempt, t.max_attempts, t.claimed_at, t.lease_expires_at,
		       greatest(extract(epoch from now() - t.claimed_at), 0)::float8
		from queues.task t
		where t.status = 'running' and ($1::text[] is null or `+TypeMatch("$1::text[]")+`)
		order by t.claimed_at, t.task_id
		limit $2`, typeArg, limit)
	if err != nil {
		return nil, fmt.Errorf("running tasks: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[RunningTask])
	if err != nil {
		return nil, fmt.Errorf("running tasks: %w", err)
	}
	return out, nil
}

// actionError wraps the database's refusal of bad input (22023) in ErrInvalidInput and an
// unknown schedule (P0002) in ErrScheduleNotFound, with the database's message.
func actionError(what string, err error) error {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch pgErr.Code {
		case "22023", "22P02":
			return fmt.Errorf("%w: %s", ErrInvalidInput, pgErr.Message)
		case "P0002":
			return fmt.Errorf("%w: %s", ErrScheduleNotFound, pgErr.Message)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Refusal says why action was not applied to a task named by id, from its outcome: "task 42
// is running; cancel it or wait for it to finish before retrying". It is empty when the task
// was acted on, or was in the state asked for already (OutcomeUnchanged).
func Refusal(action TaskAction, o TaskOutcome) string {
	st := ""
	if o.Status != nil {
		st = *o.Status
	}
	switch o.Outcome {
	case OutcomeDone, OutcomeUnchanged:
		return ""
	case OutcomeNotFound:
		return fmt.Sprintf("task %d does not exist", o.TaskID)
	case OutcomeWrongState:
		switch {
		case action == ActionRetry && st == "running":
			return fmt.Sprintf("task %d is running; cancel it or wait for it to finish before retrying", o.TaskID)
		case action == ActionRetry:
			return fmt.Sprintf("task %d is already completed; enqueue a new task to run it again", o.TaskID)
		case action == ActionCancel:
			return fmt.Sprintf("task %d is already completed and cannot be cancelled", o.TaskID)
		default:
			return fmt.Sprintf("task %d is %s; only finished tasks are deleted (cancel it first)", o.TaskID, st)
		}
	case OutcomeConflict:
		return fmt.Sprintf("task %d was not retried: a pending task of its type holds its debounce key", o.TaskID)
	default:
		return fmt.Sprintf("task %d is held by another transaction (an outcome or another action being recorded); try again", o.TaskID)
	}
}
