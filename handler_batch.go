package taskorch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/taskorch/taskorch/internal/envelope"
)

// maxHandlerBatch bounds how many success handlers run in one transaction: each holds its
// task's row lock until the commit.
const maxHandlerBatch = 100

// errHandlerRaised marks a batch in which a handler raised: its transaction is rolled back and
// each task is then run on its own.
var errHandlerRaised = errors.New("a success handler raised")

// flushHandlers completes channel tasks whose provider call succeeded, with their success
// handlers, in one transaction (queues.run_task_handlers, migration core/0027): the handlers'
// writes and the completions commit together. A handler's non-success envelope is recorded in
// queues.error and the task still completes, as on the one-task path. When a handler raises,
// the batch is rolled back and each task runs alone (finishWithHandler), so only the raising
// one fails.
func (w *Worker) flushHandlers(ctx context.Context, batch []*runningTask) {
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
					if _, err := tx.Exec(ctx, `select queues.record_error($1, $2, $3, $4)`, r.task.ID, leases[i],
						truncate(fmt.Sprintf("handler %s: %s", r.handler, outcome), maxErrorBytes),
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
		for _, r := range batch {
			w.finishAlone(r)
		}
		return
	}
	for _, r := range batch {
		o := completed()
		switch {
		case err != nil:
			o.err = err
		case !held[r.task.ID]:
			o = leaseLost("the lease was gone when its success handler's transaction began")
		case !done[r.task.ID]:
			o.refused = true
		default:
			o.status = StatusCompleted
		}
		w.finish(r, o)
	}
}

// finishAlone runs one task's success handler and completion in a transaction of its own, and
// records what came of it.
func (w *Worker) finishAlone(r *runningTask) {
	o := w.finishWithHandler(r.ctx, r.task, r.handler, r.handlerBody, "", "")
	if o.kind == outcomeComplete { // never: inLeaseTx writes its completion
		o = written(StatusCompleted)
	}
	w.record(r.ctx, r, o)
}
