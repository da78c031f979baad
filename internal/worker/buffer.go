package worker

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/taskorch/taskorch/tasktype"
)

// The buffer of claimed tasks, and the starter. Every claimed task waits here for a slot, if
// only for a moment. Claiming ahead (docs/worker.md, "Claiming ahead"): the fetcher keeps a
// small buffer of tasks it has claimed but not started, so that a slot that frees starts its
// next task at once instead of waiting a claim's round trip. The buffer is bounded by what the slots finish in
// aheadRoundTrips claim round trips (aheadEstimator), and never more than
// WorkerConfig.ClaimAhead. A buffered task holds its lease from the claim on: the renewer
// renews it like a running task, and gives it back to pending if it has waited a whole renewal
// period (the slots are busy with long tasks); a stopping worker gives the buffer back at once.

// bufferedTask is a claimed task waiting for a slot.
type bufferedTask struct {
	task    *tasktype.Task
	claimed time.Time // when the claim that took it was sent: its lease started no earlier
	claim   int64     // the claim's sequence number (0: a claim the gate does not hold back)
}

// readyBuffer is the claim-ahead buffer: claimed tasks in claim order, waiting for a slot.
type readyBuffer struct {
	mu    sync.Mutex
	queue []*bufferedTask
	byID  map[int64]*bufferedTask // the tasks still in queue (the renewer may take some out)
	// gate is the sequence number of the oldest claim in flight (math.MaxInt64: none): tasks of
	// later claims wait for it, so that two overlapping claims start their tasks in claim order.
	gate int64
	// avail has a token while the buffer may have a task to start.
	avail chan struct{}
}

func newReadyBuffer() *readyBuffer {
	return &readyBuffer{byID: map[int64]*bufferedTask{}, gate: math.MaxInt64, avail: make(chan struct{}, 1)}
}

// setGate sets the sequence number of the oldest claim in flight (math.MaxInt64: none).
func (b *readyBuffer) setGate(seq int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gate = seq
	b.signalLocked()
}

// add adds the tasks that claim number seq, sent at claimed, returned.
func (b *readyBuffer) add(tasks []*tasktype.Task, claimed time.Time, seq int64) {
	if len(tasks) == 0 {
		return
	}
	b.mu.Lock()
	for _, t := range tasks {
		bt := &bufferedTask{task: t, claimed: claimed, claim: seq}
		b.queue = append(b.queue, bt)
		b.byID[t.ID] = bt
	}
	// In claim order (priority, then due time, then id), whichever of two overlapping claims
	// returned first.
	slices.SortStableFunc(b.queue, func(x, y *bufferedTask) int {
		return cmp.Or(cmp.Compare(y.task.Priority, x.task.Priority), x.task.RunAt.Compare(y.task.RunAt), cmp.Compare(x.task.ID, y.task.ID))
	})
	b.mu.Unlock()
	select {
	case b.avail <- struct{}{}:
	default:
	}
}

// take removes and returns the first task in claim order that may start (its claim is not
// later than one still in flight); nil when there is none.
func (b *readyBuffer) take() *tasktype.Task {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, bt := range b.queue {
		if bt.claim >= b.gate {
			continue
		}
		b.queue = slices.Delete(b.queue, i, i+1)
		delete(b.byID, bt.task.ID)
		b.signalLocked()
		return bt.task
	}
	return nil
}

// takeType is take for a task of taskType only (a batch's next task, batch.go).
func (b *readyBuffer) takeType(taskType string) *tasktype.Task {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, bt := range b.queue {
		if bt.claim >= b.gate || bt.task.Type != taskType {
			continue
		}
		b.queue = slices.Delete(b.queue, i, i+1)
		delete(b.byID, bt.task.ID)
		b.signalLocked()
		return bt.task
	}
	return nil
}

// signalLocked keeps a token in avail while tasks remain.
func (b *readyBuffer) signalLocked() {
	if len(b.byID) > 0 {
		select {
		case b.avail <- struct{}{}:
		default:
		}
	}
}

// len is how many tasks wait in the buffer.
func (b *readyBuffer) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.byID)
}

// leases lists the buffered tasks' ids and leases, for the renewer.
func (b *readyBuffer) leases() (ids, leases []int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, bt := range b.byID {
		ids, leases = append(ids, id), append(leases, *bt.task.LeaseID)
	}
	return ids, leases
}

// holds reports whether the buffer holds task ref.task under lease ref.lease.
func (b *readyBuffer) holds(ref leaseRef) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	bt, ok := b.byID[ref.task]
	return ok && *bt.task.LeaseID == ref.lease
}

// removeLease takes task ref.task out of the buffer if it is there under lease ref.lease, and
// returns it; nil when it is not (started, given back, or never buffered).
func (b *readyBuffer) removeLease(ref leaseRef) *tasktype.Task {
	b.mu.Lock()
	defer b.mu.Unlock()
	bt, ok := b.byID[ref.task]
	if !ok || *bt.task.LeaseID != ref.lease {
		return nil
	}
	delete(b.byID, ref.task)
	b.compactLocked()
	return bt.task
}

// remove takes the listed tasks out of the buffer (their lease was lost, or they are given
// back) and returns those that were still in it.
func (b *readyBuffer) remove(ids []int64) []*tasktype.Task {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*tasktype.Task
	for _, id := range ids {
		if bt, ok := b.byID[id]; ok {
			delete(b.byID, id)
			out = append(out, bt.task)
		}
	}
	b.compactLocked()
	return out
}

// removeOlder takes out the tasks claimed before cutoff (nil cutoff: all) and returns them.
func (b *readyBuffer) removeOlder(cutoff time.Time, all bool) []*tasktype.Task {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*tasktype.Task
	for id, bt := range b.byID {
		if all || bt.claimed.Before(cutoff) {
			delete(b.byID, id)
			out = append(out, bt.task)
		}
	}
	b.compactLocked()
	return out
}

// compactLocked drops the queue's entries that are no longer buffered.
func (b *readyBuffer) compactLocked() {
	q := b.queue[:0]
	for _, bt := range b.queue {
		if _, ok := b.byID[bt.task.ID]; ok {
			q = append(q, bt)
		}
	}
	clear(b.queue[len(q):])
	b.queue = q
}

// runStarter starts buffered tasks as slots free, until ctx is done: it waits for a buffered
// task, then for a slot, and starts the first task in claim order. Tasks run on inner. It is the
// one place a claimed task starts, whichever source claimed it.
func (w *Worker) runStarter(ctx, inner context.Context) {
	defer w.closeBatches() // nothing starts any more: open batches wait for no more tasks (batch.go)
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.ready.avail:
		}
		select {
		case <-ctx.Done():
			return
		case w.slots <- struct{}{}:
		}
		t := w.ready.take()
		if t == nil {
			// Taken out by the renewer meanwhile, or waiting for an earlier claim: the slot goes
			// back, and the fetcher, which may have counted it as taken, hears of it.
			<-w.slots
			w.signalRoom()
			continue
		}
		if h, maxSize, maxWait, ok := w.batchHandler(t.Type); ok {
			w.startBatch(inner, t, h, maxSize, maxWait) // batch.go
			continue
		}
		w.start(inner, t)
	}
}

// dropped forgets the transport messages of tasks that left the buffer without starting (given
// back, or their lease lost): unacknowledged, they come back, and the claim decides.
func (w *Worker) dropped(tasks []*tasktype.Task) {
	for _, t := range tasks {
		w.dl.outcomeRecorded(t.ID, false)
	}
}

// freeSlot gives back the slot a task held since started, and tells the fetcher there is room.
func (w *Worker) freeSlot(started time.Time) {
	w.busy.Add(int64(time.Since(started)))
	w.freed.Add(1)
	<-w.slots
	w.signalRoom()
}

// signalRoom tells the fetcher a slot was given back.
func (w *Worker) signalRoom() {
	select {
	case w.room <- struct{}{}:
	default:
	}
}

// aheadRoundTrips is how many claim round trips of the slots' work the buffer aims at. Two
// would be enough for a freed slot never to wait, but the fetcher claims again only once half
// its room is free (claimSize), so that each claim carries enough tasks to pay for its fixed
// cost in the server (about half a millisecond for a small claim, more under a backlog): with
// six, the buffer stays above three round trips of work between claims.
const aheadRoundTrips = 6

// aheadEstimator sizes the claim-ahead buffer: what the slots finish in aheadRoundTrips claim
// round trips (slots × aheadRoundTrips × round trip ÷ task time, on the recent claims and
// tasks), never above limit.
type aheadEstimator struct {
	limit int
	slots int

	target   int     // tasks to hold ahead of the free slots
	rtt      float64 // seconds a claim takes: the slow ones, decaying (observe)
	taskTime float64 // seconds a task holds its slot, moving average; 0 until one finished

	freed, busy int64 // the worker's counters at the last observation
}

// observe updates the target after a claim that took rtt; freed and busy are the worker's
// counters of slots freed and of the seconds (in nanoseconds) they were held.
func (a *aheadEstimator) observe(rtt time.Duration, freed, busy int64) {
	// Round trips vary with the server's load: the estimate rises with a slow one at once and
	// falls back slowly, so that the buffer covers the slow claims, not the average.
	if x := rtt.Seconds(); x > a.rtt {
		a.rtt = x
	} else {
		a.rtt += (x - a.rtt) / 8
	}
	if n := freed - a.freed; n > 0 {
		a.taskTime = ewma(a.taskTime, float64(busy-a.busy)/1e9/float64(n))
	}
	a.freed, a.busy = freed, busy
	if a.taskTime <= 0 || a.limit == 0 {
		return
	}
	a.target = int(min(math.Ceil(aheadRoundTrips*a.rtt*float64(a.slots)/a.taskTime), float64(a.limit)))
}

// reset forgets the task time and claims for free slots only until a task finishes: buffered
// tasks waited a whole renewal period, the slots are busy with longer work than measured.
func (a *aheadEstimator) reset(freed, busy int64) {
	a.target, a.taskTime, a.freed, a.busy = 0, 0, freed, busy
}

// ewma moves avg a quarter of the way to x (to x at once while avg is 0).
func ewma(avg, x float64) float64 {
	if avg == 0 {
		return x
	}
	return avg + (x-avg)/4
}
