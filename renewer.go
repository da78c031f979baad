package taskorch

import (
	"context"
	"time"
)

// runRenewer extends the leases of running tasks every LeaseDuration/3, in one statement, and
// cancels the tasks whose lease is gone (cancelled by an operator, or expired and taken over)
// with cause ErrLeaseLost.
func (w *Worker) runRenewer(ctx context.Context) {
	every := max(w.cfg.LeaseDuration/3, 100*time.Millisecond)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			w.renew(ctx)
		}
	}
}

func (w *Worker) renew(ctx context.Context) {
	w.mu.Lock()
	ids := make([]int64, 0, len(w.running))
	leases := make([]int64, 0, len(w.running))
	for id, r := range w.running {
		ids, leases = append(ids, id), append(leases, *r.task.LeaseID)
	}
	w.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	rows, err := w.pool.Query(ctx, `select task_id from queues.renew_leases($1, $2, $3::interval)`,
		ids, leases, w.cfg.LeaseDuration.String())
	var kept []int64
	if err == nil {
		kept, err = collectInt64s(rows)
	}
	if err != nil {
		w.log.Warn("could not renew leases; retrying at the next tick", "tasks", len(ids), "error", err)
		return
	}
	alive := make(map[int64]bool, len(kept))
	for _, id := range kept {
		alive[id] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, id := range ids {
		if alive[id] {
			continue
		}
		// A task whose outcome is being recorded lost its lease to that outcome, not to
		// anyone else.
		if r, ok := w.running[id]; ok && *r.task.LeaseID == leases[i] && !r.recording.Load() {
			w.metrics.leaseLost()
			w.taskLogger(r.task).Warn("lease lost; cancelling the task")
			r.cancel(ErrLeaseLost)
		}
	}
}
