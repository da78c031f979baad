package taskorch

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

const maxCompletionBatch = 1000

// completions is the queue of succeeded tasks waiting for the completer. send and close are
// safe to race: a handler that outlives the worker's shutdown finds the queue closed.
type completions struct {
	ch     chan *runningTask
	mu     sync.RWMutex // held to send; close takes it for writing
	closed bool
}

func newCompletions(size int) *completions {
	return &completions{ch: make(chan *runningTask, size)}
}

// send queues r's completion; false when the completer has stopped.
func (c *completions) send(r *runningTask) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return false
	}
	c.ch <- r
	return true
}

// close stops the queue; the completer drains what is in it and returns.
func (c *completions) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.ch)
	}
}

// runCompleter records completions in batches: one complete_tasks statement for everything that
// finished since the last one. Under load that is many tasks per round trip; when idle, a single
// completion is written at once. Each task is finished (outcome.go) once its batch is written.
// It returns when the queue is closed and drained.
func (w *Worker) runCompleter(ctx context.Context) {
	batch := make([]*runningTask, 0, maxCompletionBatch)
	for r := range w.completions.ch {
		batch = append(batch[:0], r)
	drain:
		for len(batch) < maxCompletionBatch {
			select {
			case r, ok := <-w.completions.ch:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		w.flushCompletions(ctx, batch)
	}
}

// flushCompletions writes a batch: plain completions in one statement, and those with a success
// handler in transactions of up to maxHandlerBatch (handler_batch.go).
func (w *Worker) flushCompletions(ctx context.Context, batch []*runningTask) {
	plain := batch[:0:0]
	var handled []*runningTask
	for _, r := range batch {
		if r.handler != "" {
			handled = append(handled, r)
		} else {
			plain = append(plain, r)
		}
	}
	if len(plain) > 0 {
		w.flushPlain(ctx, plain)
	}
	for len(handled) > 0 {
		n := min(len(handled), maxHandlerBatch)
		w.flushHandlers(ctx, handled[:n])
		handled = handled[n:]
	}
}

func (w *Worker) flushPlain(ctx context.Context, batch []*runningTask) {
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
	var done map[int64]Status
	err := w.retryDB(octx, "complete tasks", func(ctx context.Context) error {
		rows, err := w.pool.Query(ctx, `select task_id, status from queues.complete_tasks_with_results($1, $2, $3)`, ids, leases, results)
		if err != nil {
			return err
		}
		done = make(map[int64]Status, len(batch))
		var id int64
		var status string
		_, err = pgx.ForEachRow(rows, []any{&id, &status}, func() error {
			done[id] = Status(status)
			return nil
		})
		return err
	})
	for _, r := range batch {
		o := completed()
		status, ok := done[r.task.ID]
		switch {
		case err != nil:
			o.err = err
		case !ok:
			o.refused = true
		default:
			o.status = status
			if status != StatusCompleted { // its result was over the database's bound
				o = failed(fmt.Sprintf("the task's result (%d bytes of JSON) is over the database's limit of %d bytes (8 MiB) per task; "+
					"the task is failed, its result not stored", len(r.result), maxDatabaseResultBytes), false, nil)
				o.status = status
			}
		}
		w.finish(r, o)
	}
}
