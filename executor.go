package taskorch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// maxErrorBytes bounds an error message the worker records (the SQL side bounds it too).
const maxErrorBytes = 8192

var errTimeout = errors.New("taskorch: task timed out")

// start runs t in its own goroutine; its slot is already taken.
func (w *Worker) start(inner context.Context, t *Task) {
	ctx, cancel := context.WithCancelCause(inner)
	r := &runningTask{task: t, cancel: cancel}
	w.metrics.taskStarted(t)
	w.mu.Lock()
	w.running[t.ID] = r
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() { <-w.slots }()
		defer cancel(nil)
		recorded := w.execute(ctx, t)
		w.dl.taskEnded(t.ID, recorded) // a transport's messages are acknowledged after the outcome
		w.mu.Lock()
		delete(w.running, t.ID)
		if !recorded && context.Cause(ctx) == ErrShutdown {
			w.unreleased = append(w.unreleased, r)
		}
		w.mu.Unlock()
	}()
}

// taskLogger returns the logger for lines about t. Its attributes are formatted only when a
// line is written (taskLogHandler).
func (w *Worker) taskLogger(t *Task) *slog.Logger {
	return slog.New(&taskLogHandler{inner: w.log.Handler(), attrs: []slog.Attr{
		slog.Int64("task_id", t.ID), slog.String("task_type", t.Type), slog.Int64("lease_id", *t.LeaseID), slog.Int("attempt", t.Attempt),
	}})
}

// execute dispatches t by type and records its outcome. It reports whether an outcome was
// recorded (false when the lease was lost or the worker is shutting down).
func (w *Worker) execute(ctx context.Context, t *Task) bool {
	log := w.taskLogger(t)
	if w.cfg.TaskTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, w.cfg.TaskTimeout, errTimeout)
		defer cancel()
	}
	ctx, endSpan := w.startTaskSpan(ctx, t)
	defer endSpan()
	start := time.Now()
	log.Debug("task started")
	var recorded bool
	switch {
	case t.Type == TypeDBFunction:
		recorded = w.runDBFunction(ctx, t, log)
	case isChannelType(t.Type):
		recorded = w.runChannel(ctx, t, log)
	default:
		h, ok := w.cfg.Handlers.lookup(t.Type)
		if !ok {
			msg := fmt.Sprintf("unknown task type %q: this worker has no handler for it (it runs db_function, the channel types and %d Go handler type(s))",
				t.Type, len(w.cfg.Handlers.Types()))
			recorded = w.fail(ctx, t, log, msg, false, map[string]any{"reason": "unknown_task_type"})
			break
		}
		recorded = w.runHandler(ctx, t, h, log)
	}
	w.metrics.taskFinished(t, time.Since(start))
	log.Debug("task finished", "duration", time.Since(start), "recorded", recorded)
	return recorded
}

// runHandler runs a Go handler and records what it returned.
func (w *Worker) runHandler(ctx context.Context, t *Task, h Handler, log *slog.Logger) bool {
	err := safeWork(ctx, h, t)
	if err == nil {
		// Done, even if the worker is stopping: a completion under a lost lease is refused.
		w.dl.toCompleter(t.ID)
		w.completed <- completion{taskID: t.ID, leaseID: *t.LeaseID, taskType: t.Type}
		return true
	}
	if stopped, cause := stoppedBy(ctx); stopped && cause != errTimeout {
		log.Info("task stopped without an outcome", "cause", cause, "error", err)
		return false
	}
	var snooze *SnoozeError
	var discard *DiscardError
	switch {
	case errors.As(err, &snooze):
		return w.snooze(ctx, t, log, snooze.Duration)
	case errors.As(err, &discard):
		return w.fail(ctx, t, log, discard.Err.Error(), false, map[string]any{"handler": "go", "discarded": true})
	case context.Cause(ctx) == errTimeout:
		return w.fail(ctx, t, log, fmt.Sprintf("timed out after %s: %v", w.cfg.TaskTimeout, err), true,
			map[string]any{"handler": "go", "reason": "timeout"})
	default:
		return w.fail(ctx, t, log, err.Error(), true, map[string]any{"handler": "go"})
	}
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

func safeWork(ctx context.Context, h Handler, t *Task) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	return h.Work(ctx, t)
}

// outcomeContext is the context outcome writes run on: they must happen even when the task's
// own context was cancelled (a timeout), and are bounded on their own.
func outcomeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// fail records a failed attempt: retried with backoff while attempts remain if retriable, else
// failed for good.
func (w *Worker) fail(ctx context.Context, t *Task, log *slog.Logger, msg string, retriable bool, errCtx map[string]any) bool {
	msg = truncate(msg, maxErrorBytes)
	spanFailed(ctx, msg, retriable)
	octx, cancel := outcomeContext(ctx)
	defer cancel()
	var status *string
	err := w.retryDB(octx, "fail task", func(ctx context.Context) error {
		return w.pool.QueryRow(ctx, `select queues.fail_task($1, $2, $3, $4, $5)::text`,
			t.ID, msg, *t.LeaseID, retriable, errCtx).Scan(&status)
	})
	switch {
	case err != nil:
		log.Error("could not record the failure; the lease will expire and the task run again", "error", err, "failure", logValue(msg))
		return false
	case status == nil:
		w.metrics.outcomeRefused()
		log.Warn("failure refused: the lease was lost", "failure", logValue(msg))
		return false
	}
	w.metrics.taskFailed(t, *status)
	log.Warn("task failed", "error", logValue(msg), "retriable", retriable, "status", *status)
	return true
}

func (w *Worker) snooze(ctx context.Context, t *Task, log *slog.Logger, d time.Duration) bool {
	octx, cancel := outcomeContext(ctx)
	defer cancel()
	var ok bool
	err := w.retryDB(octx, "snooze task", func(ctx context.Context) error {
		return w.pool.QueryRow(ctx, `select queues.snooze_task($1, $2, now() + $3::interval)`,
			t.ID, *t.LeaseID, d.String()).Scan(&ok)
	})
	if err != nil || !ok {
		log.Warn("snooze not recorded", "error", err, "lease_lost", !ok)
		return false
	}
	w.metrics.taskSnoozed(t)
	log.Info("task snoozed", "for", d)
	return true
}

// retryDB runs fn until it succeeds, ctx ends, or it fails with an error that retrying cannot
// fix. Connection errors (a database restart) are retried with backoff.
func (w *Worker) retryDB(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	backoff := 50 * time.Millisecond
	for {
		err := fn(ctx)
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		w.log.Warn("database unavailable; retrying", "operation", what, "error", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

func collectInt64s(rows pgx.Rows) ([]int64, error) {
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// truncate makes s storable and bounded: valid UTF-8 without NUL bytes (PostgreSQL text cannot
// hold them), at most n bytes, cut on a rune boundary.
func truncate(s string, n int) string {
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

// logValue shortens a message for a log line; the full message is in queues.error.
func logValue(s string) string { return truncate(s, 512) }
