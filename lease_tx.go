package taskorch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
)

// txWork is the SQL work of a db_function or channel-handler task, run inside inLeaseTx. It
// returns the outcome to commit with the work (completed(), or failed(...) for a named
// non-success whose writes stand) and commit = true; or, with commit = false, an outcome to
// record after the transaction is rolled back (an exception, a malformed answer).
type txWork func(ctx context.Context, tx pgx.Tx) (o *outcome, commit bool)

// inLeaseTx runs work and the task's outcome in one transaction under the task's locked lease:
// begin, lock the lease (nobody can take the task over meanwhile; nothing is done when it is
// already lost), work, complete the task or fail it for good, commit. The work and the outcome
// take effect together or not at all, so SQL work happens exactly once even when workers crash.
// onErr turns an error of the transaction itself (a lost connection, a timeout) into the
// outcome to record after the rollback.
func (w *Worker) inLeaseTx(ctx context.Context, t *Task, work txWork, onErr func(error) *outcome) *outcome {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return onErr(err)
	}
	// Rolled back (a no-op after a commit) before the outcome is recorded elsewhere: a failure
	// written in its own transaction would otherwise wait on this one's lock.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var held bool
	if err := tx.QueryRow(ctx, `select queues.lock_lease($1, $2)`, t.ID, *t.LeaseID).Scan(&held); err != nil {
		return onErr(err)
	}
	if !held {
		return leaseLost("the lease was gone when its transaction began")
	}
	o, commit := work(ctx, tx)
	if !commit {
		return o
	}
	var status Status
	switch o.kind {
	case outcomeComplete:
		var ok bool
		var err error
		if o.callFailure != "" {
			err = tx.QueryRow(ctx, `select queues.complete_failed_call($1, $2, $3, $4)`, t.ID, *t.LeaseID, o.callFailure, o.msg).Scan(&ok)
		} else {
			// The result goes in the completion's statement; over the database's bound the task
			// would be failed in this transaction, with the work's writes: roll back instead and
			// fail it after, as for a malformed answer.
			var s string
			err = tx.QueryRow(ctx, `select status from queues.complete_tasks_with_results(array[$1::bigint], array[$2::bigint], array[$3::jsonb])`,
				t.ID, *t.LeaseID, o.result).Scan(&s)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				err, ok = nil, false
			case err == nil && Status(s) != StatusCompleted:
				return failed(fmt.Sprintf("the task's result (%d bytes of JSON) is over the database's limit of %d bytes (8 MiB) per task; "+
					"its work was rolled back and its result not stored", len(o.result), maxDatabaseResultBytes),
					false, map[string]any{"reason": "result_too_large", "result_bytes": len(o.result)})
			case err == nil:
				ok = true
			}
		}
		if err != nil {
			return onErr(err)
		}
		if !ok {
			return refusedOutcome("completion", "the transaction's work was rolled back")
		}
		status = StatusCompleted
	case outcomeFail:
		var s *string
		if err := tx.QueryRow(ctx, `select queues.fail_task($1, $2, $3, $4, $5)::text`,
			t.ID, o.msg, *t.LeaseID, o.retriable, o.errCtx).Scan(&s); err != nil {
			return onErr(err)
		}
		if s == nil {
			return refusedOutcome("failure", "the transaction's work was rolled back")
		}
		status = Status(*s)
		spanFailed(ctx, o.msg, o.retriable)
	default:
		panic("taskorch: inLeaseTx: work must commit a completion or a failure")
	}
	if err := tx.Commit(ctx); err != nil {
		return onErr(err)
	}
	out := written(status)
	out.note, out.noteLevel, out.noteAttrs = o.note, o.noteLevel, o.noteAttrs
	return out
}

// withNote adds a log line to an outcome (see outcome.note).
func (o *outcome) withNote(level slog.Level, note string, attrs ...any) *outcome {
	o.note, o.noteLevel, o.noteAttrs = note, level, attrs
	return o
}
