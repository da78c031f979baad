package worker

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/taskorch/taskorch/tasktype"
)

// A claimed task takes one path through the worker (docs/worker.md, "The outcome path"):
//
//	start (executor.go)  a goroutine per task, its slot taken by the starter (buffer.go)
//	  run                the Go handler, db_function or channel branch; it returns an outcome
//	  record             has the outcome written (writer.go): completions go to the completer
//	                     (batched), the rest is written at once; db_function and channel
//	                     handlers have had theirs written already, in their lease-locked
//	                     transaction (writer.go's inLeaseTx)
//	  finish             once the outcome is written or known to be lost: the observers (metrics,
//	                     the span), the log line and the transport's acknowledgement, in one place
//
// Nothing about a task is observed before its outcome is committed.

// maxErrorBytes bounds an error message the worker records (the SQL side bounds it too).
const maxErrorBytes = 8192

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

// outcomeKind is what a branch decided about a task.
type outcomeKind uint8

const (
	// outcomeComplete: the task succeeded; the completer writes it (complete_tasks, batched).
	outcomeComplete outcomeKind = iota + 1
	// outcomeFail: the attempt failed; fail_task retries it with backoff while attempts remain
	// (retriable), or fails it for good.
	outcomeFail
	// outcomeSnooze: the handler asked to run again later; snooze_task, the attempt not spent.
	outcomeSnooze
	// outcomeWritten: the branch committed the outcome itself, with the function or handler's
	// work, in one lease-locked transaction; status says which.
	outcomeWritten
	// outcomeNone: nothing can be written: the lease was lost, or the worker stopped the task
	// (shutdown). The lease fences any late write; a shut-down worker gives the task back.
	outcomeNone
)

// outcome is what a branch returns about a task, and, once recorded, what was written.
type outcome struct {
	kind outcomeKind

	msg       string         // outcomeFail: the error; outcomeNone: why nothing was written
	retriable bool           // outcomeFail
	errCtx    map[string]any // outcomeFail: queues.error's context
	snooze    time.Duration  // outcomeSnooze

	// result, on an outcomeComplete, is the task's result (nil: none), stored by the completion's
	// own statement (queues.complete_tasks_with_results).
	result json.RawMessage

	// A retriable outcomeFail under a Go handler's options (HandlerOpts): written by
	// fail_task_with_policy when either is set, by fail_task otherwise.
	retryDelay  *time.Duration // the delay before the retry, in place of queues.retry_delay
	maxAttempts int            // a cap on the task's attempts (0: none): dead at this attempt

	// callFailure, on an outcomeComplete of a channel task whose call failed (its error handler
	// recorded the failure): what failed (queues.task.call_failure), and msg the error. inLeaseTx
	// completes such a task with queues.complete_failed_call.
	callFailure string

	// providerRefused: a channel task's provider refused the call for good (a Discard); the
	// observers count it once the outcome is committed (TaskFinish.ProviderRefused).
	providerRefused bool

	// note is the branch's own log line for a written outcome that is not a plain success (a
	// channel failure its error handler recorded, a function's named non-success), at
	// noteLevel, with noteAttrs.
	note      string
	noteLevel slog.Level
	noteAttrs []any

	// handler and handlerBody: a completion's success handler and its argument, run by the
	// completer in the completion's transaction (completedWithHandler).
	handler     string
	handlerBody []byte

	// errs are failures that do not end the task (a channel's failed call, a handler's
	// non-success), recorded in queues.error in the lease-locked transaction that writes the
	// outcome (inLeaseTx).
	errs []errRecord

	// Set by record (or by the branch, for outcomeWritten).
	status  tasktype.Status // the task's status after the write: completed, pending (retry or snooze), failed, dead
	refused bool            // the database refused the write: the lease was lost meanwhile
	lost    bool            // outcomeNone: the lease was found lost before the work began; nothing done
	err     error           // the write failed (the database unreachable past the retry budget)
}

func completed() *outcome { return &outcome{kind: outcomeComplete} }

// completedWithHandler is a completion whose success handler (a channel task's) the completer
// runs in the completion's transaction, with body.
func completedWithHandler(handler string, body []byte) *outcome {
	return &outcome{kind: outcomeComplete, handler: handler, handlerBody: body}
}

// withResult sets a completion's result.
func (o *outcome) withResult(result json.RawMessage) *outcome {
	o.result = result
	return o
}

func failed(msg string, retriable bool, errCtx map[string]any) *outcome {
	return &outcome{kind: outcomeFail, msg: truncate(msg, maxErrorBytes), retriable: retriable, errCtx: errCtx}
}

func snoozed(d time.Duration) *outcome { return &outcome{kind: outcomeSnooze, snooze: d} }

// rateLimited is the outcome of a call the service refused as too many: a snooze for as long as
// it asked, which spends no attempt, logged with what it said.
func rateLimited(e *tasktype.RateLimitedError) *outcome {
	return snoozed(rateLimitWait(e)).withNote(slog.LevelInfo, "rate limited; the task runs again later without spending an attempt",
		"error", logValue(e.Err.Error()), "retry_in", rateLimitWait(e))
}

// rateLimitWait is how long a rate-limited task waits before it runs again.
func rateLimitWait(e *tasktype.RateLimitedError) time.Duration {
	if e.RetryAfter <= 0 {
		return tasktype.DefaultRateLimitBackoff
	}
	return e.RetryAfter
}

func noOutcome(why string) *outcome { return &outcome{kind: outcomeNone, msg: why} }

// written is the outcome of a branch that committed status itself.
func written(status tasktype.Status) *outcome { return &outcome{kind: outcomeWritten, status: status} }

// refusedOutcome is an outcome the database refused because the lease was lost; what stands
// for it (a completion, a failure) is named in the log line.
func refusedOutcome(what, why string) *outcome {
	return &outcome{kind: outcomeNone, refused: true, msg: why, note: what}
}

// leaseLost is the outcome of a branch that found its lease gone before it began.
func leaseLost(why string) *outcome { return &outcome{kind: outcomeNone, lost: true, msg: why} }

// hasPolicy reports whether a failure carries a handler's retry policy, which fail_task cannot
// write: a retriable failure with a retry delay or an attempt cap.
func (o *outcome) hasPolicy() bool {
	return o.kind == outcomeFail && o.retriable && (o.retryDelay != nil || o.maxAttempts > 0)
}

// retryDelayMicros is the retry delay as fail_task_with_policy's argument: nil for none.
func (o *outcome) retryDelayMicros() *int64 {
	if o.retryDelay == nil {
		return nil
	}
	us := o.retryDelay.Microseconds()
	return &us
}

// maxAttemptsArg is the attempt cap as fail_task_with_policy's argument: nil for none.
func (o *outcome) maxAttemptsArg() *int32 {
	if o.maxAttempts <= 0 {
		return nil
	}
	n := int32(min(o.maxAttempts, 1<<31-1)) //nolint:gosec // bounded above
	return &n
}

// committed reports whether the task's outcome is in the database.
func (o *outcome) committed() bool { return o.status != "" && !o.refused && o.err == nil }

// failure is the attempt's failure an outcome stands for, as the observers see it: a failure
// (written or not), a failure the branch committed itself, or a channel call failure its error
// handler recorded while the task completed. ok is false for any other outcome.
func (o *outcome) failure() (msg string, retriable, ok bool) {
	switch {
	case o.kind == outcomeFail:
		return o.msg, o.retriable, true
	case o.kind == outcomeWritten && o.msg != "":
		return o.msg, o.retriable, true
	}
	return "", false, false
}

// record has o written (writer.go), or hands it to the completer, which writes completions in
// batches and then finishes them. Every other outcome is finished here.
func (w *Worker) record(ctx context.Context, r *runningTask, o *outcome) {
	r.recording.Store(true)
	switch o.kind {
	case outcomeComplete:
		r.result = o.result
		r.handler, r.handlerBody = o.handler, o.handlerBody
		if w.completions.send(r) {
			return // the completer finishes it
		}
		o = noOutcome("the worker stopped before the completion could be written; the task was given back")
	case outcomeFail:
		w.writeFailure(ctx, r.task, o)
	case outcomeSnooze:
		w.writeSnooze(ctx, r.task, o)
	}
	w.finish(r, o)
}

// finish observes a task's final outcome, once, after it is committed (or known to be lost):
// the observers (metrics, the span), the log line, and the transport's acknowledgement (only
// for an outcome that is committed). The task then leaves the worker's running set.
func (w *Worker) finish(r *runningTask, o *outcome) {
	t := r.task
	var logger *slog.Logger // made on first use: most tasks log nothing at the configured level
	log := func() *slog.Logger {
		if logger == nil {
			logger = w.taskLogger(t)
		}
		return logger
	}
	f := tasktype.TaskFinish{Status: o.status}
	switch {
	case o.err != nil:
		f.Outcome = tasktype.OutcomeUnrecorded
		log().Error("could not record the outcome; the lease will expire and the task run again",
			"error", o.err, "outcome", o.describe())
	case o.refused:
		f.Outcome = tasktype.OutcomeRefused
		what := o.note
		if what == "" {
			what = o.describe()
		}
		log().Warn(what+" refused: the lease was lost", "detail", o.msg)
	case o.lost:
		f.Outcome = tasktype.OutcomeLeaseLost
		log().Warn("lease lost before the task's transaction began; nothing done", "detail", o.msg)
	case o.kind == outcomeNone:
		f.Outcome = tasktype.OutcomeStopped
		log().Info("task stopped without an outcome", "cause", o.msg)
	case o.kind == outcomeSnooze:
		f.Outcome = tasktype.OutcomeSnoozed
		log().Info("task snoozed", "for", o.snooze)
	case o.kind == outcomeFail:
		f.Outcome = tasktype.OutcomeFailed
		log().Warn("task failed", "error", logValue(o.msg), "retriable", o.retriable, "status", o.status)
	case o.status == tasktype.StatusCompleted:
		f.Outcome = tasktype.OutcomeCompleted
	default: // written by the branch as a failure (a function's named non-success)
		f.Outcome = tasktype.OutcomeFailed
	}
	if o.note != "" && o.committed() {
		log().Log(r.ctx, o.noteLevel, o.note, o.noteAttrs...)
	}
	w.dl.outcomeRecorded(t.ID, o.committed())
	f.Duration = time.Since(r.started)
	f.Error, f.Retriable, _ = o.failure()
	f.ProviderRefused = o.providerRefused && o.committed()
	w.obs.taskFinished(r.ctx, t, f)
	if w.log.Enabled(r.ctx, slog.LevelDebug) {
		log().Debug("task finished", "duration", f.Duration, "recorded", o.committed())
	}
	w.mu.Lock()
	delete(w.running, *t.LeaseID) // by lease: a stale run of the task never removes a newer one
	w.mu.Unlock()
	if o.committed() {
		select { // a fetcher waiting for a limit's running slots claims again (fetch.go)
		case w.settled <- struct{}{}:
		default:
		}
	}
}

// errRecord is a failure to record in queues.error with an outcome; what names it in the
// failure that follows when recording it fails.
type errRecord struct {
	what, msg string
	errCtx    map[string]any
}

// withError adds a failure to record with the outcome (see outcome.errs).
func (o *outcome) withError(what, msg string, errCtx map[string]any) *outcome {
	o.errs = append(o.errs, errRecord{what: what, msg: msg, errCtx: errCtx})
	return o
}

// withNote adds a log line to an outcome (see outcome.note).
func (o *outcome) withNote(level slog.Level, note string, attrs ...any) *outcome {
	o.note, o.noteLevel, o.noteAttrs = note, level, attrs
	return o
}

// describe names the write an outcome stands for, for log lines.
func (o *outcome) describe() string {
	switch o.kind {
	case outcomeComplete:
		return "completion"
	case outcomeFail:
		return "failure"
	case outcomeSnooze:
		return "snooze"
	default:
		return "outcome"
	}
}
