package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/taskorch/taskorch/tasktype"
)

// RunOne is the worker's path for one task, without a worker running, for package taskorchtest:
// the task goes through run (its handler's options, its timeout, the attempt cap, the result
// slot) and runHandler (what the handler returned, made an outcome), as a claimed task does, in
// the calling goroutine. Nothing is written: WriteOutcome writes what it returns.

// Ran is what one run of a task came to: the outcome a worker would write.
type Ran struct {
	// Outcome is OutcomeCompleted, OutcomeFailed, OutcomeSnoozed, or OutcomeStopped (the
	// context ended first and nothing would be written).
	Outcome tasktype.Outcome
	// Err is what the handler returned; for a handler that panicked, the panic as an error.
	Err error
	// Result is a completion's result (SetResult), nil for none.
	Result json.RawMessage
	// Message is a failure's error as the worker records it; Retriable, whether it retries.
	Message   string
	Retriable bool
	// Snooze is how long a snoozed (or rate-limited) task waits.
	Snooze time.Duration
	// RetryDelay and MaxAttempts are a retriable failure's handler policy (HandlerOpts).
	RetryDelay  *time.Duration
	MaxAttempts int

	o *outcome
}

// errorOf captures what a handler returned, for Ran.Err.
type errorOf struct {
	Handlers
	err *error
}

func (h errorOf) Lookup(taskType string) (tasktype.Handler, tasktype.HandlerOpts, bool) {
	hd, opts, ok := h.Handlers.Lookup(taskType)
	if !ok {
		return hd, opts, ok
	}
	return tasktype.HandlerFunc(func(ctx context.Context, t *tasktype.Task) error {
		err := hd.Work(ctx, t)
		*h.err = err
		return err
	}), opts, true
}

// RunOne runs t through cfg's Go handler for its type as a worker with cfg would run it once
// claimed, and returns the outcome. t need not be claimed (LeaseID nil). A built-in type
// (db_function, the channels) is refused: those run in the database's transaction.
func RunOne(ctx context.Context, cfg Config, t *tasktype.Task) (*Ran, error) {
	if t.Type == tasktype.TypeDBFunction || IsChannelType(t.Type) {
		return nil, fmt.Errorf("task type %q is built in; only a Go handler's task can run outside a worker", t.Type)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var herr error
	if cfg.Handlers != nil {
		cfg.Handlers = errorOf{Handlers: cfg.Handlers, err: &herr}
	}
	w := &Worker{cfg: cfg, log: cfg.Logger.With("worker_id", cfg.ID)}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r := &runningTask{task: t, ctx: ctx, cancel: cancel, started: time.Now()}
	o := w.run(ctx, r)
	r.recording.Store(true)
	ran := &Ran{Err: herr, o: o}
	switch o.kind {
	case outcomeComplete:
		ran.Outcome, ran.Result = tasktype.OutcomeCompleted, o.result
	case outcomeFail:
		ran.Outcome, ran.Message, ran.Retriable = tasktype.OutcomeFailed, o.msg, o.retriable
		ran.RetryDelay, ran.MaxAttempts = o.retryDelay, o.maxAttempts
		if ran.Err == nil {
			ran.Err = fmt.Errorf("%s", o.msg) // a panic, an attempt past the cap, an unknown type
		}
	case outcomeSnooze:
		ran.Outcome, ran.Snooze = tasktype.OutcomeSnoozed, o.snooze
	default:
		ran.Outcome, ran.Message = tasktype.OutcomeStopped, o.msg
	}
	return ran, nil
}
