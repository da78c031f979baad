package taskorch

import (
	"context"
	"time"
)

// runRenewer extends the leases of running tasks every LeaseDuration/3, in one statement, and
// stops the tasks whose lease is gone (cancelled by an operator, or expired and taken over)
// through checkLeases. A cancellation usually reaches the worker sooner (lease_check.go).
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
	refs := w.runningLeases()
	if len(refs) == 0 {
		return
	}
	ids, leases := make([]int64, len(refs)), make([]int64, len(refs))
	for i, ref := range refs {
		ids[i], leases[i] = ref.task, ref.lease
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
	var missing []leaseRef
	for _, ref := range refs {
		if !alive[ref.task] {
			missing = append(missing, ref)
		}
	}
	// Not extended: cancelled, or expired and taken over, or finished meanwhile. The database
	// says which, on the one path that stops tasks whose lease is gone (lease_check.go).
	w.checkLeases(ctx, missing)
}
