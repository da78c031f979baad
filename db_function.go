package taskorch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/taskorch/taskorch/internal/envelope"
)

// TypeDBFunction is the task type whose payload names a SQL function to run:
// {"db_function": "schema.function", ...}. The function gets the whole payload.
const TypeDBFunction = "db_function"

// runDBFunction runs internal.run_function(payload.db_function, payload) and records the
// outcome in the same transaction (DESIGN §2 "Transactions"): the function's writes and the
// task's completion commit together, so SQL work takes effect exactly once. The lease is locked
// first, so nobody can take the task over meanwhile. An exception in the function rolls
// everything back and fails the attempt in a separate transaction (retried with backoff).
func (w *Worker) runDBFunction(ctx context.Context, t *Task, log *slog.Logger) bool {
	var p struct {
		DBFunction *string `json:"db_function"`
	}
	if err := json.Unmarshal(t.Payload, &p); err != nil || p.DBFunction == nil || *p.DBFunction == "" {
		return w.fail(ctx, t, log, `db_function task has no "db_function" in its payload (a string naming schema.function)`,
			false, map[string]any{"reason": "bad_payload"})
	}
	fn := *p.DBFunction
	log = log.With("db_function", truncate(fn, 200))
	errCtx := map[string]any{"db_function": truncate(fn, 200)}

	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return w.dbFunctionError(ctx, t, log, fn, err, errCtx)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var held bool
	if err := tx.QueryRow(ctx, `select queues.lock_lease($1, $2)`, t.ID, *t.LeaseID).Scan(&held); err != nil {
		return w.dbFunctionError(ctx, t, log, fn, err, errCtx)
	}
	if !held {
		w.metrics.leaseLost()
		log.Warn("lease lost before the function ran; nothing done")
		return false
	}
	var raw []byte
	if err := tx.QueryRow(ctx, `select internal.run_function($1, $2)`, fn, t.Payload).Scan(&raw); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return w.dbFunctionError(ctx, t, log, fn, err, errCtx)
	}
	res, err := envelope.Parse(raw)
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		errCtx["reason"] = "malformed_envelope"
		return w.fail(ctx, t, log, fmt.Sprintf("%s returned %v; its work was rolled back", fn, err), false, errCtx)
	}
	var status *string // the failure's outcome when not succeeded
	if res.Succeeded {
		var ok bool
		if err := tx.QueryRow(ctx, `select queues.complete_task($1, $2)`, t.ID, *t.LeaseID).Scan(&ok); err != nil {
			return w.dbFunctionError(ctx, t, log, fn, err, errCtx)
		}
		if !ok {
			w.metrics.outcomeRefused()
			log.Warn("completion refused: the lease was lost; the function's work was rolled back")
			return false
		}
	} else {
		// A named non-success (a status other than "succeeded", a validation failure): the
		// function ran and its writes stand; the task is failed without retry and the outcome
		// recorded with the function's name (seeds 000/002).
		errCtx["reason"] = "non_success_envelope"
		if res.Status != "" {
			errCtx["status"] = res.Status
		}
		msg := fmt.Sprintf("%s: %s", fn, res.Outcome())
		if err := tx.QueryRow(ctx, `select queues.fail_task($1, $2, $3, false, $4)::text`,
			t.ID, msg, *t.LeaseID, errCtx).Scan(&status); err != nil {
			return w.dbFunctionError(ctx, t, log, fn, err, errCtx)
		}
		if status == nil {
			w.metrics.outcomeRefused()
			log.Warn("outcome refused: the lease was lost; the function's work was rolled back")
			return false
		}
		log.Info("function reported a non-success outcome; not retried", "outcome", res.Outcome())
	}
	if err := tx.Commit(ctx); err != nil {
		return w.dbFunctionError(ctx, t, log, fn, err, errCtx)
	}
	if status == nil {
		w.metrics.taskCompleted(t.Type)
	} else {
		w.metrics.taskFailed(t, *status)
	}
	return true
}

// dbFunctionError records a failed db_function attempt, after its transaction was rolled back.
// The runner's refusals (no such function, no grant, wrong signature, a malformed name) cannot
// succeed on retry and fail the task for good; an exception raised by the function, a timeout or
// a lost connection fail the attempt, which is retried with backoff.
func (w *Worker) dbFunctionError(ctx context.Context, t *Task, log *slog.Logger, fn string, err error, errCtx map[string]any) bool {
	if stopped, cause := stoppedBy(ctx); stopped && cause != errTimeout {
		log.Info("task stopped without an outcome; the function's work was rolled back", "cause", cause)
		return false
	}
	retriable := true
	msg := err.Error()
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		errCtx["sqlstate"] = pgErr.Code
		msg = pgErr.Message
		if pgErr.Detail != "" {
			msg += " (" + pgErr.Detail + ")"
		}
		if pgErr.Where != "" {
			errCtx["where"] = truncate(pgErr.Where, 1024)
		}
		if runnerRefusal(pgErr) {
			retriable = false
			errCtx["reason"] = "function_refused"
		}
	}
	if context.Cause(ctx) == errTimeout {
		msg = fmt.Sprintf("timed out after %s: %s", w.cfg.TaskTimeout, msg)
		errCtx["reason"] = "timeout"
	}
	if errors.Is(err, pgx.ErrTxClosed) {
		retriable = true
	}
	return w.fail(ctx, t, log, fmt.Sprintf("%s: %s", truncate(fn, 200), msg), retriable, errCtx)
}

// runnerRefusal reports whether internal.run_function refused the call itself (no such function,
// no grant, wrong signature, malformed name), as opposed to the function it called raising: the
// runner's own refusals start with "run_function: ".
func runnerRefusal(e *pgconn.PgError) bool {
	switch e.Code {
	case "42883", "42501", "22023":
		return strings.HasPrefix(e.Message, "run_function: ")
	}
	return false
}
