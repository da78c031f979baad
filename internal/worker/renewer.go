package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch/tasktype"
)

// runRenewer extends the leases of running and buffered tasks every LeaseDuration/3, in one
// statement. A running task whose lease is gone (cancelled by an operator, or expired and taken
// over) is stopped through checkLeases (a cancellation usually reaches the worker sooner:
// lease_check.go); a buffered one is dropped from the claim-ahead buffer. A buffered task that
// has waited a whole period is given back to pending instead: the slots are busy with longer
// work than the buffer was sized for, and another worker may run it sooner.
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
	refs := w.runningLeases()
	bids, bleases := w.ready.leases()
	if len(refs)+len(bids) == 0 {
		return
	}
	ids, leases := make([]int64, 0, len(refs)+len(bids)), make([]int64, 0, len(refs)+len(bids))
	for _, ref := range refs {
		ids, leases = append(ids, ref.task), append(leases, ref.lease)
	}
	ids, leases = append(ids, bids...), append(leases, bleases...)
	// Bounded: a renewal that cannot be answered is tried again at the next tick.
	ctx, cancel := context.WithTimeout(ctx, max(w.cfg.LeaseDuration/3, 5*time.Second))
	defer cancel()
	rows, err := w.pool.Query(ctx, `select task_id, lease_id from queues.renew_leases($1, $2, $3::interval)`,
		ids, leases, w.cfg.LeaseDuration.String())
	alive := make(map[leaseRef]bool, len(ids))
	if err == nil {
		var ref leaseRef
		_, err = pgx.ForEachRow(rows, []any{&ref.task, &ref.lease}, func() error {
			alive[ref] = true
			return nil
		})
	}
	if err != nil {
		w.log.Warn("could not renew leases; retrying at the next tick", "tasks", len(ids), "error", err)
		return
	}
	var missing []leaseRef
	for _, ref := range refs {
		if !alive[ref] {
			missing = append(missing, ref)
		}
	}
	var lostAhead []int64
	for i, id := range bids {
		if !alive[leaseRef{task: id, lease: bleases[i]}] {
			lostAhead = append(lostAhead, id)
		}
	}
	lost := w.ready.remove(lostAhead)
	w.dropped(lost)
	for _, t := range lost {
		w.obs.event(tasktype.WorkerEvent{Kind: tasktype.EventLeaseLost})
		w.taskLogger(t).Warn("lease lost while the task waited in the claim-ahead buffer; not starting it")
	}
	// Not extended: cancelled, or expired and taken over, or finished meanwhile. The database
	// says which, on the one path that stops tasks whose lease is gone (lease_check.go).
	w.checkLeases(ctx, missing)
}
