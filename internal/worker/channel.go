package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch/internal/envelope"
	"github.com/taskorch/taskorch/tasktype"
)

// channelPayload is what the worker reads of a channel task's payload; the rest passes through.
type channelPayload struct {
	BeforeHandler  string `json:"before_handler"`
	SuccessHandler string `json:"success_handler"`
	ErrorHandler   string `json:"error_handler"`
}

// runChannel is the handler invoker: the before handler builds the provider request, the
// provider is called outside any transaction, then the success handler (with
// {original_payload, worker_payload}) or the error handler (with {original_payload, error,
// error_class})
// runs in one transaction with the task's completion (the completer's batch for a success,
// inLeaseTx for a failure). A task with handlers belongs
// to a supervisor and is always completed after processing: retries are the supervisor's new
// attempts. A task without handlers is retried at task level when the provider fails, and its
// success is a plain completion, written by the completer.
func (w *Worker) runChannel(ctx context.Context, t *tasktype.Task) *outcome {
	var p channelPayload
	if err := json.Unmarshal(t.Payload, &p); err != nil {
		return failed(fmt.Sprintf("%s task payload: %v", t.Type, err), false, map[string]any{"reason": "bad_payload"})
	}
	owned := p.SuccessHandler != "" || p.ErrorHandler != ""
	provider, ok := w.cfg.Channels[t.Type]
	if !ok || provider == nil {
		msg := fmt.Sprintf("no provider is configured for the %s channel on this worker (see %s)", t.Type, channelEnv(t.Type))
		return w.channelFailed(ctx, t, p, owned, msg, false, map[string]any{"reason": tasktype.CallFailureNoProvider})
	}

	request := json.RawMessage(t.Payload)
	if p.BeforeHandler != "" {
		res, err := w.callHandler(ctx, p.BeforeHandler, t.Payload)
		switch {
		case err != nil:
			if stopped, cause := stoppedBy(ctx); stopped && cause != errTimeout {
				return noOutcome(fmt.Sprintf("%v during the before handler", cause))
			}
			return w.channelFailed(ctx, t, p, owned, fmt.Sprintf("before handler %s: %v", p.BeforeHandler, err), true,
				map[string]any{"reason": tasktype.CallFailureBeforeHandlerError, "handler": p.BeforeHandler})
		case !res.Succeeded:
			return w.channelFailed(ctx, t, p, owned, fmt.Sprintf("before handler %s: %s", p.BeforeHandler, res.Outcome()), false,
				map[string]any{"reason": tasktype.CallFailureBeforeHandlerRefused, "handler": p.BeforeHandler})
		}
		request = res.Payload
		if len(request) == 0 {
			request = json.RawMessage("null")
		}
	}

	resp, err := provider.Call(ctx, tasktype.ChannelCall{Task: t, Request: request, IdempotencyKey: fmt.Sprintf("taskorch-task-%d", t.ID)})
	if err != nil {
		if stopped, cause := stoppedBy(ctx); stopped && cause != errTimeout {
			return noOutcome(fmt.Sprintf("%v during the provider call", cause))
		}
		var limited *tasktype.RateLimitedError
		if errors.As(err, &limited) {
			// Not a failure: the same attempt runs again when the provider said, and no
			// handler hears of it.
			return rateLimited(limited)
		}
		var discard *tasktype.DiscardError
		retriable := !errors.As(err, &discard)
		if !retriable && discard.Err != nil {
			err = discard.Err // the provider's own words; "not retriable" is said by the outcome
		}
		return w.channelFailed(ctx, t, p, owned, fmt.Sprintf("%s provider: %v", t.Type, err), retriable,
			map[string]any{"reason": tasktype.CallFailureProvider})
	}
	if len(resp) == 0 {
		resp = json.RawMessage("{}")
	}
	if p.SuccessHandler == "" {
		return completed()
	}
	body, _ := json.Marshal(map[string]json.RawMessage{"original_payload": t.Payload, "worker_payload": resp})
	// The completer runs the success handler with the completion, batched with others
	// (completer.go); it runs even when the task's context has ended meanwhile.
	return completedWithHandler(p.SuccessHandler, body)
}

// channelFailed is the outcome of a failed channel attempt: with an error handler, the handler
// records the failure fact and the task is completed (the supervisor retries with a new
// attempt), its call_failure and last_error saying what failed; without handlers the attempt
// fails at task level.
// errCtx["reason"] is what failed: a CallFailure* constant.
func (w *Worker) channelFailed(ctx context.Context, t *tasktype.Task, p channelPayload, owned bool,
	msg string, retriable bool, errCtx map[string]any) *outcome {
	reason, _ := errCtx["reason"].(string)
	// Permanent when the provider said retrying cannot succeed (a Discard).
	refused := !retriable && reason == tasktype.CallFailureProvider
	if !owned {
		o := failed(msg, retriable, errCtx)
		o.providerRefused = refused
		return o
	}
	var o *outcome
	if p.ErrorHandler == "" {
		// Owned by a supervisor that did not ask to hear about failures: record and complete.
		o = w.finishWithHandler(ctx, t, "", nil, msg, reason)
	} else {
		// The failure's class: permanent, so the supervisor ends the process at once, or
		// retriable (docs/processes.md, "Permanent failures").
		class := "retriable"
		if refused {
			class = "permanent"
		}
		body, _ := json.Marshal(map[string]any{"original_payload": json.RawMessage(t.Payload), "error": truncate(msg, maxErrorBytes),
			"error_class": class})
		o = w.finishWithHandler(ctx, t, p.ErrorHandler, body, msg, reason)
	}
	// Only the completion its handler recorded: a handler that raised fails the attempt, which
	// runs again.
	o.providerRefused = refused && o.status == tasktype.StatusCompleted
	return o
}

// finishWithHandler runs handler (if any) with body and completes the task, in one
// lease-locked transaction (inLeaseTx); failure, when not empty, is recorded in queues.error in
// it too, and the task is completed with queues.complete_failed_call: its call_failure is
// reason, its last_error failure. If the handler raises, everything rolls back and the attempt
// fails (the task runs again: the provider may be called twice, see docs/guarantees.md). It runs
// even when the task's context was cancelled (a timeout) once the provider has answered.
func (w *Worker) finishWithHandler(ctx context.Context, t *tasktype.Task, handler string, body []byte, failure, reason string) *outcome {
	octx, cancel := outcomeContext(ctx)
	defer cancel()
	errCtx := map[string]any{"handler": handler}
	onErr := func(err error) *outcome { return failed(fmt.Sprintf("handler %s: %v", handler, err), true, errCtx) }
	return w.inLeaseTx(octx, t, func(ctx context.Context, tx pgx.Tx) (*outcome, bool) {
		o := completed()
		if failure != "" {
			o.withError("record channel failure", failure, map[string]any{"channel": t.Type, "error_handler": handler})
		}
		if handler != "" {
			var raw []byte
			if err := tx.QueryRow(ctx, `select internal.run_function($1, $2)`, handler, body).Scan(&raw); err != nil {
				return onErr(err), false
			}
			if res, err := envelope.Parse(raw); err != nil || !res.Succeeded {
				outcome := res.Outcome()
				if err != nil {
					outcome = err.Error()
				}
				o.withError("record handler outcome", fmt.Sprintf("handler %s: %s", handler, outcome), errCtx)
			}
		}
		if failure != "" {
			o.callFailure, o.msg = reason, truncate(failure, maxErrorBytes)
			if o.callFailure == "" {
				o.callFailure = "call_failed"
			}
			o = o.withNote(slog.LevelWarn, "channel attempt failed; recorded by the error handler", "error", logValue(failure), "handler", handler)
		}
		return o, true
	}, onErr)
}

// callHandler runs a before handler and parses its envelope. It runs in the next batch of
// before handlers (before_batch.go), in a short transaction of its own: a before handler
// holds no lease lock.
func (w *Worker) callHandler(ctx context.Context, handler string, payload json.RawMessage) (envelope.Result, error) {
	raw, err := w.before.Do(ctx, beforeCall{handler: handler, payload: payload})
	if err != nil {
		return envelope.Result{}, err
	}
	return envelope.Parse(raw)
}

func channelEnv(t string) string {
	switch t {
	case tasktype.TypeEmail:
		return "TASKORCH_EMAIL_PROVIDER"
	case tasktype.TypeSMS:
		return "TASKORCH_SMS_PROVIDER"
	default:
		return "TASKORCH_FILES_SIGNER"
	}
}
