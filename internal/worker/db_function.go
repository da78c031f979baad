package worker

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
	"github.com/taskorch/taskorch/tasktype"
)

// runDBFunction runs internal.run_function(payload.db_function, payload) inside the task's
// lease-locked transaction (inLeaseTx): the function's writes and the task's outcome commit
// together, so SQL work takes effect exactly once. An exception in the function rolls
// everything back and the attempt fails (retried with backoff); the runner's own refusals (no
// such function, no grant) fail the task for good.
func (w *Worker) runDBFunction(ctx context.Context, t *tasktype.Task) *outcome {
	var p struct {
		DBFunction *string `json:"db_function"`
	}
	if err := json.Unmarshal(t.Payload, &p); err != nil || p.DBFunction == nil || *p.DBFunction == "" {
		return failed(`db_function task has no "db_function" in its payload (a string naming schema.function)`,
			false, map[string]any{"reason": "bad_payload"})
	}
	fn := *p.DBFunction
	errCtx := map[string]any{"db_function": truncate(fn, 200)}
	onErr := func(err error) *outcome { return w.dbFunctionError(ctx, fn, err, errCtx) }
	return w.inLeaseTx(ctx, t, func(ctx context.Context, tx pgx.Tx) (*outcome, bool) {
		var raw []byte
		if err := tx.QueryRow(ctx, `select internal.run_function($1, $2)`, fn, t.Payload).Scan(&raw); err != nil {
			return onErr(err), false
		}
		res, err := envelope.Parse(raw)
		if err != nil {
			errCtx["reason"] = "malformed_envelope"
			return failed(fmt.Sprintf("%s returned %v; its work was rolled back", fn, err), false, errCtx), false
		}
		if res.Succeeded {
			// The envelope's payload is the task's result, stored with the completion.
			if limit := w.cfg.MaxResultBytes; limit >= 0 && len(res.Payload) > limit {
				errCtx["reason"] = "result_too_large"
				errCtx["result_bytes"] = len(res.Payload)
				return failed(fmt.Sprintf("%s: %s; its work was rolled back", fn, resultTooLarge(len(res.Payload), limit, false)), false, errCtx), false
			}
			return completed().withResult(res.Payload), true
		}
		// A named non-success (a status other than "succeeded", a validation failure): the
		// function ran and its writes stand; the task is failed without retry and the outcome
		// recorded with the function's name.
		errCtx["reason"] = "non_success_envelope"
		if res.Status != "" {
			errCtx["status"] = res.Status
		}
		return failed(fmt.Sprintf("%s: %s", fn, res.Outcome()), false, errCtx).
			withNote(slog.LevelInfo, "function reported a non-success outcome; not retried", "db_function", truncate(fn, 200), "outcome", res.Outcome()), true
	}, onErr)
}

// dbFunctionError is the outcome of a db_function attempt that raised, after its transaction
// is rolled back. The runner's refusals (no such function, no grant, wrong signature, a
// malformed name) cannot succeed on retry and fail the task for good; an exception raised by
// the function, a timeout or a lost connection fail the attempt, which is retried with backoff.
// A task stopped by the worker (lease lost, shutdown) has no outcome.
func (w *Worker) dbFunctionError(ctx context.Context, fn string, err error, errCtx map[string]any) *outcome {
	if stopped, cause := stoppedBy(ctx); stopped && cause != errTimeout {
		return noOutcome(fmt.Sprintf("%v; the function's work was rolled back", cause))
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
	return failed(fmt.Sprintf("%s: %s", truncate(fn, 200), msg), retriable, errCtx)
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
