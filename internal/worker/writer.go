package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch/internal/envelope"
	"github.com/taskorch/taskorch/tasktype"
)

// The outcome writer: the one file that writes what became of a task. Every statement that
// records an outcome under a task's lease is issued here, and nowhere else in the worker
// (TestOutcomeSQLIsWrittenInOneFile): a failure (queues.fail_task, fail_task_with_policy), a
// snooze (snooze_task), the completer's batches (complete_tasks_with_results, and with success
// handlers run_task_handlers), the lease-locked transaction of a db_function or a channel's
// handler (lock_lease, then complete_tasks_with_results, complete_failed_call or fail_task, and
// the errors it records with record_error), and the give-backs (release_tasks,
// release_worker_tasks).
//
// A write fills in its outcome (status, refused, err) and observes nothing: the caller finishes
// the task once the write is committed (outcome.go), so metrics and spans always follow the
// commit.

// writeFailure writes a failed attempt: queues.fail_task_with_policy when the failure carries a
// handler's retry policy, queues.fail_task otherwise. The task is retried with backoff while
// attempts remain (retriable), or fails for good.
func (w *Worker) writeFailure(ctx context.Context, t *tasktype.Task, o *outcome) {
	octx, cancel := outcomeContext(ctx)
	defer cancel()
	var status *string
	o.err = w.retryDB(octx, "fail task", func(ctx context.Context) (err error) {
		status, err = failOn(ctx, w.pool, t, o)
		return err
	})
	if o.err == nil {
		if status == nil {
			o.refused = true
		} else {
			o.status = tasktype.Status(*status)
		}
	}
}

// failOn writes the failure o of t on db: its status after, nil when the lease was lost.
func failOn(ctx context.Context, db Querier, t *tasktype.Task, o *outcome) (status *string, err error) {
	if o.hasPolicy() {
		err = db.QueryRow(ctx, `select queues.fail_task_with_policy($1, $2, $3, $4::bigint * interval '1 microsecond', $5, $6)::text`,
			t.ID, o.msg, *t.LeaseID, o.retryDelayMicros(), o.maxAttemptsArg(), o.errCtx).Scan(&status)
	} else {
		err = db.QueryRow(ctx, `select queues.fail_task($1, $2, $3, $4, $5)::text`,
			t.ID, o.msg, *t.LeaseID, o.retriable, o.errCtx).Scan(&status)
	}
	return status, err
}

// snoozeOn writes the snooze o of t on db: false when the lease was lost.
func snoozeOn(ctx context.Context, db Querier, t *tasktype.Task, o *outcome) (ok bool, err error) {
	err = db.QueryRow(ctx, `select queues.snooze_task($1, $2, now() + $3::interval)`, t.ID, *t.LeaseID, o.snooze.String()).Scan(&ok)
	return ok, err
}

// Querier runs statements: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// completeTasksSQL completes tasks under their leases, each with its result (nil: none); it
// returns the tasks it wrote, each with its status: completed, or failed when its result is
// over the database's bound.
const completeTasksSQL = `select task_id, status from queues.complete_tasks_with_results($1, $2, $3)`

// WriteOutcome writes ran, RunOne's outcome of t (claimed: its lease is t.LeaseID), on db with
// the statements a worker writes it with, and returns the task's status after. It writes
// nothing, and says why, for a stopped run or a lease that was lost (the task was cancelled or
// its lease expired meanwhile).
func WriteOutcome(ctx context.Context, db Querier, t *tasktype.Task, ran *Ran) (tasktype.Status, error) {
	if t.LeaseID == nil {
		return "", errors.New("the task was not claimed: there is no lease to write its outcome under")
	}
	o := ran.o
	switch o.kind {
	case outcomeComplete:
		var results []json.RawMessage
		if o.result != nil {
			results = []json.RawMessage{o.result}
		}
		rows, err := db.Query(ctx, completeTasksSQL, []int64{t.ID}, []int64{*t.LeaseID}, results)
		if err != nil {
			return "", err
		}
		var id int64
		var status string
		if _, err := pgx.ForEachRow(rows, []any{&id, &status}, func() error { return nil }); err != nil {
			return "", err
		}
		if status == "" {
			return "", errors.New("the completion was refused: the lease was lost")
		}
		return tasktype.Status(status), nil
	case outcomeFail:
		status, err := failOn(ctx, db, t, o)
		if err != nil {
			return "", err
		}
		if status == nil {
			return "", errors.New("the failure was refused: the lease was lost")
		}
		return tasktype.Status(*status), nil
	case outcomeSnooze:
		ok, err := snoozeOn(ctx, db, t, o)
		if err != nil {
			return "", err
		}
		if !ok {
			return "", errors.New("the snooze was refused: the lease was lost")
		}
		return tasktype.StatusPending, nil
	}
	return "", fmt.Errorf("nothing to write: %s", o.msg)
}

// writeSnooze puts the task back to pending until o.snooze has passed, its attempt not spent
// (queues.snooze_task).
func (w *Worker) writeSnooze(ctx context.Context, t *tasktype.Task, o *outcome) {
	octx, cancel := outcomeContext(ctx)
	defer cancel()
	var ok bool
	o.err = w.retryDB(octx, "snooze task", func(ctx context.Context) (err error) {
		ok, err = snoozeOn(ctx, w.pool, t, o)
		return err
	})
	if o.err == nil {
		o.refused = !ok
		if ok {
			o.status = tasktype.StatusPending
		}
	}
}

// failUnreadable fails a claimed task the worker cannot read (claim.go), for good: running it
// again cannot help. The claim's other tasks are not held up by it.
func (w *Worker) failUnreadable(ctx context.Context, t *tasktype.Task, reason string) {
	msg := fmt.Sprintf("the worker could not read the claimed task: %s; failed without retry (docs/guarantees.md)", reason)
	w.log.Error("claimed a task it cannot read; failing it alone", "task_id", t.ID, "task_type", t.Type, "reason", reason)
	if t.LeaseID == nil {
		return // no lease to fail it under: it returns to pending when its lease expires
	}
	octx, cancel := outcomeContext(ctx)
	defer cancel()
	err := w.retryDB(octx, "fail unreadable task", func(ctx context.Context) error {
		_, err := w.pool.Exec(ctx, `select queues.fail_task($1, $2, $3, false, $4)`, t.ID, msg, *t.LeaseID,
			map[string]any{"reason": "unreadable_task"})
		return err
	})
	if err != nil {
		w.log.Error("could not fail the unreadable task; its lease will expire", "task_id", t.ID, "error", err)
	}
}

// writeCompletions completes a batch of succeeded tasks in one statement, each with its result
// (queues.complete_tasks_with_results), and sets each task's outcome in outs (as long as batch,
// in batch order: the completer's, reused): a completion, refused (the lease was lost), failed
// (its result was over the database's bound: the statement failed it), or not written (err).
func (w *Worker) writeCompletions(ctx context.Context, batch []*runningTask, outs []outcome) {
	ids := make([]int64, len(batch))
	leases := make([]int64, len(batch))
	var results []json.RawMessage // nil when no task of the batch has a result: the common case
	for i, r := range batch {
		ids[i], leases[i] = r.task.ID, *r.task.LeaseID
		if r.result != nil {
			if results == nil {
				results = make([]json.RawMessage, len(batch))
			}
			results[i] = r.result
		}
	}
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var done map[int64]tasktype.Status
	err := w.retryDB(octx, "complete tasks", func(ctx context.Context) error {
		rows, err := w.pool.Query(ctx, completeTasksSQL, ids, leases, results)
		if err != nil {
			return err
		}
		done = make(map[int64]tasktype.Status, len(batch))
		var id int64
		var status string
		_, err = pgx.ForEachRow(rows, []any{&id, &status}, func() error {
			done[id] = tasktype.Status(status)
			return nil
		})
		return err
	})
	for i, r := range batch {
		o := &outs[i]
		*o = outcome{kind: outcomeComplete}
		status, ok := done[r.task.ID]
		switch {
		case err != nil:
			o.err = err
		case !ok:
			o.refused = true
		default:
			o.status = status
			if status != tasktype.StatusCompleted { // its result was over the database's bound
				*o = *failed(resultTooLarge(len(r.result), maxDatabaseResultBytes, true), false, nil)
				o.status = status
			}
		}
	}
}

// maxHandlerBatch bounds how many success handlers run in one transaction: each holds its
// task's row lock until the commit.
const maxHandlerBatch = 100

// errHandlerRaised marks a batch in which a handler raised: its transaction is rolled back and
// each task is then run on its own.
var errHandlerRaised = errors.New("a success handler raised")

// writeHandlerBatch completes channel tasks whose provider call succeeded, with their success
// handlers, in one transaction (queues.run_task_handlers, migration core/0027): the handlers'
// writes and the completions commit together. A handler's non-success envelope is recorded in
// queues.error and the task still completes, as on the one-task path. It sets each task's
// outcome in outs (as writeCompletions does); raised is true, and nothing is written, when a
// handler raised (or the runner refused its name): the caller then runs each task alone, so
// that only the raising one fails.
func (w *Worker) writeHandlerBatch(ctx context.Context, batch []*runningTask, outs []outcome) (raised bool) {
	ids := make([]int64, len(batch))
	leases := make([]int64, len(batch))
	handlers := make([]string, len(batch))
	bodies := make([][]byte, len(batch))
	for i, r := range batch {
		ids[i], leases[i], handlers[i], bodies[i] = r.task.ID, *r.task.LeaseID, r.handler, r.handlerBody
	}
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var held, done map[int64]bool
	err := w.retryDB(octx, "complete tasks with their success handlers", func(ctx context.Context) error {
		err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
			held, done = make(map[int64]bool, len(batch)), make(map[int64]bool, len(batch))
			envs := make(map[int64][]byte, len(batch))
			rows, err := tx.Query(ctx, `select task_id, held, envelope from queues.run_task_handlers($1, $2, $3, $4)`,
				ids, leases, handlers, bodies)
			if err != nil {
				return err
			}
			var id int64
			var h bool
			var env []byte
			if _, err := pgx.ForEachRow(rows, []any{&id, &h, &env}, func() error {
				held[id] = h
				if h {
					envs[id] = append([]byte(nil), env...)
				}
				return nil
			}); err != nil {
				return err
			}
			var okIDs, okLeases []int64
			for i, r := range batch {
				if !held[r.task.ID] {
					continue
				}
				if res, err := envelope.Parse(envs[r.task.ID]); err != nil || !res.Succeeded {
					outcome := res.Outcome()
					if err != nil {
						outcome = err.Error()
					}
					if err := recordError(ctx, tx, r.task.ID, leases[i], fmt.Sprintf("handler %s: %s", r.handler, outcome),
						map[string]any{"handler": r.handler}); err != nil {
						return err
					}
				}
				okIDs, okLeases = append(okIDs, r.task.ID), append(okLeases, leases[i])
			}
			if len(okIDs) == 0 {
				return nil
			}
			rows, err = tx.Query(ctx, `select task_id from queues.complete_tasks_with_results($1, $2, null)`, okIDs, okLeases)
			if err != nil {
				return err
			}
			_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
				done[id] = true
				return nil
			})
			return err
		})
		// A statement the server refused (a handler raised, or the runner refused its name) is
		// not retried as a batch: each task runs alone, and only the one at fault fails.
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && !transient(err) {
			return fmt.Errorf("%w: %w", errHandlerRaised, err)
		}
		return err
	})
	if errors.Is(err, errHandlerRaised) {
		return true
	}
	for i, r := range batch {
		o := &outs[i]
		*o = outcome{kind: outcomeComplete}
		switch {
		case err != nil:
			o.err = err
		case !held[r.task.ID]:
			*o = *leaseLost("the lease was gone when its success handler's transaction began")
		case !done[r.task.ID]:
			o.refused = true
		default:
			o.status = tasktype.StatusCompleted
		}
	}
	return false
}

// recordError records a failure that does not end the task (a handler's non-success, a channel
// call that failed while its task completes) in queues.error, under the task's lease, in tx.
func recordError(ctx context.Context, tx pgx.Tx, taskID, leaseID int64, msg string, errCtx map[string]any) error {
	_, err := tx.Exec(ctx, `select queues.record_error($1, $2, $3, $4)`, taskID, leaseID, truncate(msg, maxErrorBytes), errCtx)
	return err
}

// txWork is the SQL work of a db_function or channel-handler task, run inside inLeaseTx. It
// returns the outcome to commit with the work (completed(), or failed(...) for a named
// non-success whose writes stand) and commit = true; or, with commit = false, an outcome to
// record after the transaction is rolled back (an exception, a malformed answer). Errors to keep
// whatever the work's outcome go in the outcome (withErrors), written in the transaction.
type txWork func(ctx context.Context, tx pgx.Tx) (o *outcome, commit bool)

// inLeaseTx runs work and the task's outcome in one transaction under the task's locked lease:
// begin, lock the lease (nobody can take the task over meanwhile; nothing is done when it is
// already lost), work, complete the task or fail it for good, commit. The work and the outcome
// take effect together or not at all, so SQL work happens exactly once even when workers crash.
// onErr turns an error of the transaction itself (a lost connection, a timeout) into the
// outcome to record after the rollback.
func (w *Worker) inLeaseTx(ctx context.Context, t *tasktype.Task, work txWork, onErr func(error) *outcome) *outcome {
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
	for _, e := range o.errs {
		if err := recordError(ctx, tx, t.ID, *t.LeaseID, e.msg, e.errCtx); err != nil {
			return failed(fmt.Sprintf("%s: %v", e.what, err), true, e.errCtx)
		}
	}
	var status tasktype.Status
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
			case err == nil && tasktype.Status(s) != tasktype.StatusCompleted:
				return failed(resultTooLarge(len(o.result), maxDatabaseResultBytes, true)+"; its work was rolled back",
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
		status = tasktype.StatusCompleted
	case outcomeFail:
		var s *string
		if err := tx.QueryRow(ctx, `select queues.fail_task($1, $2, $3, $4, $5)::text`,
			t.ID, o.msg, *t.LeaseID, o.retriable, o.errCtx).Scan(&s); err != nil {
			return onErr(err)
		}
		if s == nil {
			return refusedOutcome("failure", "the transaction's work was rolled back")
		}
		status = tasktype.Status(*s)
	default:
		panic("taskorch: inLeaseTx: work must commit a completion or a failure")
	}
	if err := tx.Commit(ctx); err != nil {
		return onErr(err)
	}
	out := written(status)
	// What the observers see of it once it is finished: a failure committed, or a channel call
	// that failed while its task completed (its error handler recorded it).
	out.msg, out.retriable = o.msg, o.retriable && o.kind == outcomeFail
	out.note, out.noteLevel, out.noteAttrs = o.note, o.noteLevel, o.noteAttrs
	return out
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

// releaseBuffered gives tasks claimed and not started back to pending without spending their
// attempt (queues.release_tasks), and forgets their transport messages.
func (w *Worker) releaseBuffered(ctx context.Context, tasks []*tasktype.Task, why string) {
	if len(tasks) == 0 {
		return
	}
	w.dropped(tasks)
	ids := make([]int64, len(tasks))
	leases := make([]int64, len(tasks))
	for i, t := range tasks {
		ids[i], leases[i] = t.ID, *t.LeaseID
	}
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var released []int64
	err := w.retryDB(octx, "release buffered tasks", func(ctx context.Context) error {
		rows, err := w.pool.Query(ctx, `select * from queues.release_tasks($1, $2, $3)`, ids, leases,
			fmt.Sprintf("worker %s: %s", w.cfg.ID, why))
		if err != nil {
			return err
		}
		released, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	if err != nil {
		w.log.Warn("could not give buffered tasks back; their leases will expire", "tasks", len(ids), "error", err)
		return
	}
	w.log.Debug("gave buffered tasks back to pending", "released", len(released), "why", why)
}

// giveBack returns to pending every task the database says this worker still holds, without
// spending their attempt (queues.release_worker_tasks). Run calls it once the completer has
// written every completion.
func (w *Worker) giveBack(ctx context.Context) {
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var released []int64
	err := w.retryDB(octx, "release tasks", func(ctx context.Context) error {
		rows, err := w.pool.Query(ctx, `select * from queues.release_worker_tasks($1, $2)`, w.cfg.ID,
			fmt.Sprintf("worker %s shut down before the task finished", w.cfg.ID))
		if err != nil {
			return err
		}
		released, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	switch {
	case err != nil:
		w.log.Error("could not give tasks back; their leases will expire", "error", err)
	case len(released) > 0:
		w.log.Info("gave running tasks back to pending", "released", len(released), "tasks", released)
	}
}

// LockLease locks task id under lease in tx (queues.lock_lease, FOR KEY SHARE): false when the
// lease is not the task's current one. A durable workflow's transactional step takes it first
// (docs/workflows.md, "Durable workflows in Go").
func LockLease(ctx context.Context, tx Querier, id, lease int64) (held bool, err error) {
	err = tx.QueryRow(ctx, `select queues.lock_lease($1, $2)`, id, lease).Scan(&held)
	return held, err
}
