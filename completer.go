package taskorch

import (
	"context"
	"time"
)

// completion is a Go handler's success, waiting to be recorded.
type completion struct {
	taskID, leaseID int64
	taskType        string
}

const maxCompletionBatch = 1000

// runCompleter records completions in batches: one complete_tasks statement for everything that
// finished since the last one. Under load that is many tasks per round trip; when idle, a single
// completion is written at once. It returns when w.completed is closed and drained.
func (w *Worker) runCompleter(ctx context.Context) {
	ids := make([]int64, 0, maxCompletionBatch)
	leases := make([]int64, 0, maxCompletionBatch)
	types := make([]string, 0, maxCompletionBatch)
	for c := range w.completed {
		ids, leases, types = append(ids[:0], c.taskID), append(leases[:0], c.leaseID), append(types[:0], c.taskType)
	drain:
		for len(ids) < maxCompletionBatch {
			select {
			case c, ok := <-w.completed:
				if !ok {
					break drain
				}
				ids, leases, types = append(ids, c.taskID), append(leases, c.leaseID), append(types, c.taskType)
			default:
				break drain
			}
		}
		w.flushCompletions(ctx, ids, leases, types)
	}
}

func (w *Worker) flushCompletions(ctx context.Context, ids, leases []int64, types []string) {
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var done []int64
	err := w.retryDB(octx, "complete tasks", func(ctx context.Context) error {
		rows, err := w.pool.Query(ctx, `select * from queues.complete_tasks($1, $2)`, ids, leases)
		if err != nil {
			return err
		}
		done, err = collectInt64s(rows)
		return err
	})
	w.dl.completionsFlushed(ids, err == nil) // a transport's messages are acknowledged once written
	if err != nil {
		w.log.Error("could not record completions; their leases will expire and the tasks run again",
			"tasks", len(ids), "error", err)
		return
	}
	ok := make(map[int64]bool, len(done))
	for _, id := range done {
		ok[id] = true
	}
	for i, id := range ids {
		if ok[id] {
			w.metrics.taskCompleted(types[i])
			continue
		}
		w.metrics.outcomeRefused()
		w.log.Warn("completion refused: the lease was lost", "task_id", id, "task_type", types[i], "lease_id", leases[i])
	}
}
