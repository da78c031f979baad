package worker

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/taskorch/taskorch/tasktype"
)

// cancelChannel is the channel queues.cancel_task notifies, with '<task_id>:<lease_id>', when it
// cancels a running task (docs/worker.md, "Cancellation").
const cancelChannel = "taskorch_cancel"

// leaseCheckInterval is how often a worker that hears no notifications (PollOnly, or while its
// LISTEN connection is down) asks which of its running tasks are no longer its own.
const leaseCheckInterval = 500 * time.Millisecond

// leaseCheckTimeout bounds one check, its retries over a broken connection included.
const leaseCheckTimeout = 10 * time.Second

// lostLeasesSQL returns, of the given (task, lease) pairs, those no longer held, with the task's
// status now.
const lostLeasesSQL = `select task_id, lease_id, status::text from queues.lost_leases($1, $2)`

// leaseRef is a running task's id under the lease this worker holds it by.
type leaseRef struct{ task, lease int64 }

// runLeaseChecker stops, within a second of their cancellation, the running tasks that are no
// longer this worker's: it checks when a cancel notification names one of them or the LISTEN
// connection comes back (notifications may have been missed), and every leaseCheckInterval
// while tasks run and no notification can arrive (PollOnly, or the LISTEN connection down).
func (w *Worker) runLeaseChecker(ctx context.Context) {
	tick := time.NewTicker(leaseCheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.leaseCheck:
		case <-tick.C:
			if !w.cfg.PollOnly && w.listening.Load() {
				continue
			}
		}
		w.checkLeases(ctx, w.heldLeases())
	}
}

// signalLeaseCheck asks the lease checker to check the running tasks now.
func (w *Worker) signalLeaseCheck() {
	select {
	case w.leaseCheck <- struct{}{}:
	default:
	}
}

// cancelNotified handles a taskorch_cancel notification: when it names a task this worker runs
// under that lease, the checker asks the database. The payload alone stops nothing: any role
// may NOTIFY.
func (w *Worker) cancelNotified(payload string) {
	ref, ok := parseCancelPayload(payload)
	if !ok {
		w.log.Debug("ignoring a malformed cancel notification", "payload", logValue(payload))
		return
	}
	w.mu.Lock()
	r, mine := w.running[ref.lease]
	mine = mine && r.task.ID == ref.task
	if !mine {
		// Perhaps claimed by this worker and not started yet: start looks here.
		w.cancelHints.add(ref)
	}
	w.mu.Unlock()
	// A task waiting in the claim-ahead buffer is checked too, and leaves it without starting.
	if mine || w.ready.holds(ref) {
		w.signalLeaseCheck()
	}
}

// cancelHintsSize bounds the cancel notifications a worker remembers for tasks it does not run.
// A task cancelled between its claim's commit and its start is named by one of the last few.
const cancelHintsSize = 256

// cancelHints remembers the last cancel notifications that named no running task: one may name a
// task whose claim committed and that this worker has not started yet, and would be missed.
// Guarded by Worker.mu.
type cancelHints struct {
	set  map[leaseRef]struct{}
	ring [cancelHintsSize]leaseRef
	next int
}

func (h *cancelHints) add(ref leaseRef) {
	if h.set == nil {
		h.set = make(map[leaseRef]struct{}, cancelHintsSize)
	}
	if _, ok := h.set[ref]; ok {
		return
	}
	if len(h.set) == cancelHintsSize {
		delete(h.set, h.ring[h.next])
	}
	h.ring[h.next] = ref
	h.set[ref] = struct{}{}
	h.next = (h.next + 1) % cancelHintsSize
}

// has reports whether a cancel notification named ref.
func (h *cancelHints) has(ref leaseRef) bool {
	_, ok := h.set[ref]
	return ok
}

// parseCancelPayload reads '<task_id>:<lease_id>'.
func parseCancelPayload(s string) (leaseRef, bool) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return leaseRef{}, false
	}
	task, err1 := strconv.ParseInt(a, 10, 64)
	lease, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil {
		return leaseRef{}, false
	}
	return leaseRef{task: task, lease: lease}, true
}

// heldLeases lists the running tasks and those waiting in the claim-ahead buffer, with their
// leases.
func (w *Worker) heldLeases() []leaseRef {
	refs := w.runningLeases()
	ids, leases := w.ready.leases()
	for i, id := range ids {
		refs = append(refs, leaseRef{task: id, lease: leases[i]})
	}
	return refs
}

// runningLeases lists the running tasks with their leases.
func (w *Worker) runningLeases() []leaseRef {
	w.mu.Lock()
	defer w.mu.Unlock()
	refs := make([]leaseRef, 0, len(w.running))
	for lease, r := range w.running {
		refs = append(refs, leaseRef{task: r.task.ID, lease: lease})
	}
	return refs
}

// checkLeases asks the database which of refs this worker no longer holds
// (queues.lost_leases) and stops those tasks. It is the one path by which a running task learns
// its lease is gone, whoever suspects it: the lease renewal (a lease it did not extend), a
// cancel notification, or the periodic check. A task cancelled by an operator is stopped with
// cause ErrTaskCancelled and logged at info; any other lost lease (expired and taken over) with
// ErrLeaseLost, logged as a warning. When the database cannot answer within leaseCheckTimeout,
// nothing is stopped: the next check asks again, and the lease renewal finds the lease gone.
func (w *Worker) checkLeases(ctx context.Context, refs []leaseRef) {
	if len(refs) == 0 {
		return
	}
	ids, leases := make([]int64, len(refs)), make([]int64, len(refs))
	for i, ref := range refs {
		ids[i], leases[i] = ref.task, ref.lease
	}
	var gone []leaseRef
	statuses := map[leaseRef]*string{}
	cctx, cancel := context.WithTimeout(ctx, leaseCheckTimeout)
	defer cancel()
	err := w.retryDB(cctx, "check leases", func(ctx context.Context) error {
		rows, err := w.pool.Query(ctx, lostLeasesSQL, ids, leases)
		if err != nil {
			return err
		}
		gone = gone[:0]
		clear(statuses)
		for rows.Next() {
			var ref leaseRef
			var status *string
			if err := rows.Scan(&ref.task, &ref.lease, &status); err != nil {
				rows.Close()
				return err
			}
			gone = append(gone, ref)
			statuses[ref] = status
		}
		return rows.Err()
	})
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("could not check the running tasks' leases; checking again later", "tasks", len(refs), "error", err)
		}
		return
	}
	cancelled := func(ref leaseRef) bool {
		s := statuses[ref]
		return s != nil && tasktype.Status(*s) == tasktype.StatusCancelled
	}
	var notRunning []leaseRef
	defer func() {
		// Not running under that lease: perhaps waiting in the claim-ahead buffer, which it
		// leaves without starting (after w.mu is released: the buffer has its own lock).
		for _, ref := range notRunning {
			t := w.ready.removeLease(ref)
			if t == nil {
				continue
			}
			w.dropped([]*tasktype.Task{t})
			w.obs.event(tasktype.WorkerEvent{Kind: tasktype.EventLeaseLost})
			if cancelled(ref) {
				w.taskLogger(t).Info("task cancelled while it waited in the claim-ahead buffer; not starting it")
			} else {
				w.taskLogger(t).Warn("lease lost while the task waited in the claim-ahead buffer; not starting it")
			}
		}
	}()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ref := range gone {
		r, ok := w.running[ref.lease]
		if !ok || r.task.ID != ref.task {
			notRunning = append(notRunning, ref)
			continue
		}
		// A task whose outcome is being recorded lost its lease to that outcome, not to anyone
		// else.
		if r.recording.Load() {
			continue
		}
		// Counted and logged once per run: later checks find the lease gone until the task
		// returns.
		if !r.leaseGone.CompareAndSwap(false, true) {
			continue
		}
		w.obs.event(tasktype.WorkerEvent{Kind: tasktype.EventLeaseLost})
		if cancelled(ref) {
			w.taskLogger(r.task).Info("task cancelled; stopping its handler")
			r.cancel(tasktype.ErrTaskCancelled)
			continue
		}
		status := "(gone)"
		if s := statuses[ref]; s != nil {
			status = *s
		}
		w.taskLogger(r.task).Warn("lease lost; cancelling the task", "status", status)
		r.cancel(tasktype.ErrLeaseLost)
	}
}
