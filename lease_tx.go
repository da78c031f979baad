package taskorch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		return onErr(err)
	}
	// A task stopped while its transaction runs (cancelled by an operator, its lease lost, a
	// timeout, a hard stop) has its statement cancelled in the database at once: the function's
	// work is rolled back and its locks released now, not when it would have finished.
	sc := w.cancelStatementOnDone(ctx, conn)
	defer sc.release()
	tx, err := conn.Begin(ctx)
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

// statementCanceller cancels, in the database, the statement running on a task's connection
// when the task's context ends (cancelStatementOnDone).
type statementCanceller struct {
	ctx  context.Context
	conn *pgxpool.Conn
	stop func() bool
	done chan struct{} // closed once the cancel request, if one was started, is sent
	sent atomic.Bool
}

// cancelStatementOnDone sends PostgreSQL a cancel request for conn's backend when ctx ends. pgx
// only closes its side of the connection when a context ends mid-query; the server would run the
// statement on until it tried to answer, holding its locks. release must be called once the
// connection's work is done: it waits for a cancel request in flight and then returns the
// connection to the pool, or, when a cancel request was sent, closes it (a late cancel request
// must never reach a statement of whoever uses the connection next).
func (w *Worker) cancelStatementOnDone(ctx context.Context, conn *pgxpool.Conn) *statementCanceller {
	sc := &statementCanceller{ctx: ctx, conn: conn, done: make(chan struct{})}
	sc.stop = context.AfterFunc(ctx, func() {
		defer close(sc.done)
		sc.sent.Store(true)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := conn.Conn().PgConn().CancelRequest(cctx); err != nil {
			w.log.Debug("could not send a cancel request for a stopped task's statement", "error", err)
		}
	})
	return sc
}

func (sc *statementCanceller) release() {
	if !sc.stop() {
		<-sc.done // the cancel request was started: let it finish with the connection
	}
	if sc.sent.Load() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(sc.ctx), 5*time.Second)
		_ = sc.conn.Conn().Close(cctx)
		cancel()
	}
	sc.conn.Release()
}
