package taskorch

import (
	"context"
	"time"
)

// runRenewer extends the leases of running and buffered tasks every LeaseDuration/3, in one
// statement, and cancels the tasks whose lease is gone (cancelled by an operator, or expired and
// taken over) with cause ErrLeaseLost, or drops them from the claim-ahead buffer. A buffered
// task that has waited a whole period is given back to pending instead: the slots are busy
// with longer work than the buffer was sized for, and another worker may run it sooner.
func (w *Worker) runRenewer(ctx context.Context) {
	every := max(w.cfg.LeaseDuration/3, 100*time.Millisecond)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if stale := w.ready.removeOlder(time.Now().Add(-every), false); len(stale) > 0 {
				w.staleAhead.Add(1) // the fetcher stops claiming ahead until a task finishes
				w.releaseBuffered(ctx, stale, "waited in the claim-ahead buffer for a whole lease renewal period")
			}
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
	bids, bleases := w.ready.leases()
	ids, leases = append(ids, bids...), append(leases, bleases...)
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
	var lost []int64
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, id := range ids {
		if alive[id] {
			continue
		}
		lost = append(lost, id)
		// A task whose outcome is being recorded lost its lease to that outcome, not to
		// anyone else.
		if r, ok := w.running[id]; ok && *r.task.LeaseID == leases[i] && !r.recording.Load() {
			w.metrics.leaseLost()
			w.taskLogger(r.task).Warn("lease lost; cancelling the task")
			r.cancel(ErrLeaseLost)
		}
	}
	for _, t := range w.ready.remove(lost) {
		w.metrics.leaseLost()
		w.taskLogger(t).Warn("lease lost while the task waited in the claim-ahead buffer; not starting it")
	}
}
