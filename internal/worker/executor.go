package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/taskorch/taskorch/tasktype"
)

var errTimeout = errors.New("taskorch: task timed out")

// How a task runs, once the starter (buffer.go) has a slot for it: start gives it a goroutine and
// a context, run takes the branch for its type (a Go handler here, db_function.go, channel.go),
// which returns an outcome, and record (outcome.go) has it written.

// start runs t in its own goroutine; its slot is already taken. The goroutine runs the task's
// branch, records the outcome it returns, and frees the slot: a completion is left to the
// completer, which finishes the task once it is written (outcome.go). The observers see the
// task start here (its span begins) and finish once its outcome is written.
func (w *Worker) start(inner context.Context, t *tasktype.Task) { w.startTask(inner, t, nil) }

// startTask is start for a task that runs in batch b (nil: alone; batch.go).
func (w *Worker) startTask(inner context.Context, t *tasktype.Task, b *batchCall) {
	ctx, cancel := context.WithCancelCause(inner)
	r := &runningTask{task: t, cancel: cancel, started: time.Now(), batch: b}
	ctx = w.obs.taskStarted(ctx, t)
	r.ctx = ctx
	w.mu.Lock()
	w.running[*t.LeaseID] = r
	// Cancelled after the claim committed and before now: its notification found no task.
	cancelled := w.cancelHints.has(leaseRef{task: t.ID, lease: *t.LeaseID})
	w.mu.Unlock()
	if cancelled {
		w.signalLeaseCheck()
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer w.freeSlot(r.started)
		defer cancel(nil)
		o := w.run(ctx, r)
		if b != nil {
			b.leave(r) // ended without reaching the handler: the batch does not wait for it
		}
		w.record(ctx, r, o)
	}()
}

// taskLogger returns the logger for lines about t. Its attributes are formatted only when a
// line is written (taskLogHandler).
func (w *Worker) taskLogger(t *tasktype.Task) *slog.Logger {
	var lease int64 // 0: not claimed (RunOne's task)
	if t.LeaseID != nil {
		lease = *t.LeaseID
	}
	return slog.New(&taskLogHandler{inner: w.log.Handler(), attrs: []slog.Attr{
		slog.Int64("task_id", t.ID), slog.String("task_type", t.Type), slog.Int64("lease_id", lease), slog.Int("attempt", t.Attempt),
	}})
}

// run dispatches the task by type (a db_function, a channel, or a Go handler) and returns its
// outcome. A Go handler's options (HandlerOpts) apply here: its timeout in place of the
// worker's, and its attempt cap and retry delay to the failure it returns.
func (w *Worker) run(ctx context.Context, r *runningTask) *outcome {
	t := r.task
	builtin := t.Type == tasktype.TypeDBFunction || IsChannelType(t.Type)
	var h tasktype.Handler
	var opts tasktype.HandlerOpts
	var known bool
	if !builtin && w.cfg.Handlers != nil {
		h, opts, known = w.cfg.Handlers.Lookup(t.Type)
	}
	timeout := attemptTimeout(opts, w.cfg.TaskTimeout)
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, errTimeout)
		defer cancel()
	}
	if w.log.Enabled(ctx, slog.LevelDebug) {
		w.taskLogger(t).Debug("task started")
	}
	if d := w.warnAfter(t.Type, opts); d > 0 {
		warn := time.AfterFunc(d, func() { w.runningLong(r, d) })
		defer warn.Stop()
	}
	switch {
	case t.Type == tasktype.TypeDBFunction:
		return w.runDBFunction(ctx, t)
	case IsChannelType(t.Type):
		return w.runChannel(ctx, t)
	case !known:
		n := 0
		if w.cfg.Handlers != nil {
			n = len(w.cfg.Handlers.Types())
		}
		return failed(fmt.Sprintf("unknown task type %q: this worker has no handler for it (it runs db_function, the channel types and %d Go handler type(s))",
			t.Type, n), false, map[string]any{"reason": "unknown_task_type"})
	}
	if limit := opts.MaxAttempts; limit > 0 && t.Attempt > limit {
		// Claimed past the handler's cap: an earlier attempt's lease expired, which counts.
		o := failed(fmt.Sprintf("attempt %d is past the handler's MaxAttempts of %d (an earlier attempt's lease expired); not run",
			t.Attempt, limit), true, map[string]any{"handler": "go", "reason": "handler_max_attempts"})
		o.maxAttempts = limit
		return o
	}
	if r.batch != nil {
		h = batchJoin{b: r.batch, r: r} // the batch's one call runs the handler (batch.go)
	}
	for i := len(w.cfg.Middleware) - 1; i >= 0; i-- {
		if h = w.cfg.Middleware[i](h); h == nil {
			return failed(fmt.Sprintf("middleware %d of %d returned a nil handler", i+1, len(w.cfg.Middleware)), true,
				map[string]any{"handler": "go", "reason": "middleware"})
		}
	}
	slot := &ResultSlot{max: w.cfg.MaxResultBytes}
	return w.runHandler(withHandlerDB(withResultSlot(ctx, slot), w.pool, w.checkpoints), t, h, opts, timeout, slot)
}

// attemptTimeout is the bound of one attempt given the handler's options and the worker's
// TaskTimeout: 0 for none.
func attemptTimeout(o tasktype.HandlerOpts, workerTimeout time.Duration) time.Duration {
	switch {
	case o.Timeout < 0:
		return 0
	case o.Timeout > 0:
		return o.Timeout
	default:
		return workerTimeout
	}
}

// runHandler runs a Go handler and turns what it returned into an outcome. timeout is the
// attempt's bound (0: none), for the message of a timeout; slot holds the result the handler set
// (SetResult), which a completion carries.
func (w *Worker) runHandler(ctx context.Context, t *tasktype.Task, h tasktype.Handler, opts tasktype.HandlerOpts,
	timeout time.Duration, slot *ResultSlot) *outcome {
	err := safeWork(ctx, h, t)
	if err == nil {
		// Done, even if the worker is stopping: a completion under a lost lease is refused.
		result, over := slot.get()
		if over != "" {
			return failed(over, false, map[string]any{"handler": "go", "reason": "result_too_large"})
		}
		return completed().withResult(result)
	}
	if errors.Is(err, ErrWaitingInDatabase) {
		return written(tasktype.StatusWaiting)
	}
	if errors.Is(err, ErrSuspendedInDatabase) {
		return written(tasktype.StatusPending)
	}
	if stopped, cause := stoppedBy(ctx); stopped && cause != errTimeout {
		return noOutcome(fmt.Sprintf("%v (the handler returned: %v)", cause, err))
	}
	var snooze *tasktype.SnoozeError
	var limited *tasktype.RateLimitedError
	var discard *tasktype.DiscardError
	var o *outcome
	switch {
	case errors.As(err, &snooze):
		return snoozed(snooze.Duration)
	case errors.As(err, &limited):
		return rateLimited(limited)
	case errors.As(err, &discard):
		return failed(discard.Err.Error(), false, map[string]any{"handler": "go", "discarded": true})
	case context.Cause(ctx) == errTimeout:
		err = fmt.Errorf("timed out after %s: %w", timeout, err)
		o = failed(err.Error(), true, map[string]any{"handler": "go", "reason": "timeout"})
	default:
		o = failed(err.Error(), true, map[string]any{"handler": "go"})
	}
	w.applyRetryPolicy(o, t, opts, err)
	return o
}

// applyRetryPolicy sets a retriable failure's attempt cap and retry delay from the handler's
// options; without them the failure is written by fail_task, with the database's policy.
func (w *Worker) applyRetryPolicy(o *outcome, t *tasktype.Task, opts tasktype.HandlerOpts, err error) {
	o.maxAttempts = opts.MaxAttempts
	if opts.RetryDelay == nil {
		return
	}
	limit := t.MaxAttempts
	if opts.MaxAttempts > 0 {
		limit = min(limit, opts.MaxAttempts)
	}
	if t.Attempt >= limit {
		return // no retry follows: the task ends dead
	}
	if d, ok := w.retryDelay(t, opts.RetryDelay, err); ok {
		o.retryDelay = &d
	}
}

// retryDelay calls a handler's RetryDelay; ok is false when it panicked (logged), and the
// database's backoff applies.
func (w *Worker) retryDelay(t *tasktype.Task, fn func(attempt int, err error) time.Duration, err error) (d time.Duration, ok bool) {
	defer func() {
		if v := recover(); v != nil {
			w.taskLogger(t).Error("the handler's RetryDelay panicked; the database's backoff applies", "panic", fmt.Sprint(v))
			ok = false
		}
	}()
	return max(fn(t.Attempt, err), 0), true
}

// stoppedBy reports whether ctx was cancelled by the worker (lease lost, shutdown or timeout).
func stoppedBy(ctx context.Context) (bool, error) {
	if ctx.Err() == nil {
		return false, nil
	}
	return true, context.Cause(ctx)
}

// panicError is a recovered handler panic.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string {
	return truncate(fmt.Sprintf("handler panicked: %v\n%s", p.value, p.stack), maxErrorBytes)
}

func safeWork(ctx context.Context, h tasktype.Handler, t *tasktype.Task) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	return h.Work(ctx, t)
}
