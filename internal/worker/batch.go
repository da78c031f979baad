package worker

import (
	"cmp"
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskorch/taskorch/tasktype"
)

// Batch handlers (docs/worker.md, "Batch handlers"): one call of a handler takes several claimed
// tasks of its type. A batch is formed by the starter (buffer.go) from the tasks the worker has
// claimed, so the claim path alone decides what runs (limits, keys, pauses, quiet workers,
// fencing). Each task of a batch is otherwise a task like any other: it takes its own slot, has
// its own context, lease, renewal, timeout, middleware, observers' events and outcome, written by
// the one writer of outcomes and fenced by its own lease. Only the handler's call is shared: each
// task's run, where it would call the handler, joins its batch instead (batchJoin), and the
// batch's call is made once every task started in it has joined (or ended without reaching the
// handler, e.g. past its attempt cap) and no more may join.

// BatchHandler is a Go handler whose tasks the worker runs several at a time (package taskorch's
// AddBatchHandler registers one). Its Work runs one task alone (RunOne, taskorchtest).
type BatchHandler interface {
	tasktype.Handler
	// BatchLimits returns the most tasks of one call (at least 1), and how long a started batch
	// may wait for more tasks of its type to be claimed (0: only those the buffer holds).
	BatchLimits() (maxSize int, maxWait time.Duration)
	// WorkBatch runs tasks and returns one error per task, in their order. results[i] is the
	// result slot of tasks[i] (SetResult); it may be nil.
	WorkBatch(ctx context.Context, tasks []*tasktype.Task, results []*ResultSlot) []error
}

// batchCall is one batch: the tasks started in it, and its one call of the handler.
type batchCall struct {
	h       BatchHandler
	typ     string
	maxSize int
	inner   context.Context // the context tasks run on: the batch's call's context derives from it

	mu      sync.Mutex
	members int            // tasks started in the batch
	settled int            // of those, joined or ended without joining
	closed  bool           // no more tasks may start in it: MaxWait over, or MaxWait 0 (a full batch takes none either)
	joined  []*batchMember // the tasks that reached the handler, in the order they did
	fired   bool           // the call is made (once b is closed or full, and every task started has settled)
}

// batchMember is a task waiting in its batch for the handler's call.
type batchMember struct {
	ctx  context.Context // the task's context, as its run passed it to the handler
	task *tasktype.Task
	slot *ResultSlot
	done chan struct{} // closed once err is set
	err  error
}

// batchHandler returns the batch handler of taskType and its limits; ok is false when taskType's
// handler is not one (or it is a built-in type).
func (w *Worker) batchHandler(taskType string) (h BatchHandler, maxSize int, maxWait time.Duration, ok bool) {
	if w.cfg.Handlers == nil || taskType == tasktype.TypeDBFunction || IsChannelType(taskType) {
		return nil, 0, 0, false
	}
	hd, _, known := w.cfg.Handlers.Lookup(taskType)
	if !known {
		return nil, 0, 0, false
	}
	if h, ok = hd.(BatchHandler); !ok {
		return nil, 0, 0, false
	}
	maxSize, maxWait = h.BatchLimits()
	return h, max(maxSize, 1), max(maxWait, 0), true
}

// startBatch starts t, whose slot is taken, in a batch of its type: the open one if it has room
// (MaxWait > 0), else a new one. Then, while the batch has room, it starts in it the other tasks
// of the type that the buffer holds and may start, each in a free slot it takes without waiting.
// A batch without MaxWait closes at once; one with MaxWait stays open to the tasks the starter
// takes until it is full or MaxWait has passed since it opened.
func (w *Worker) startBatch(inner context.Context, t *tasktype.Task, h BatchHandler, maxSize int, maxWait time.Duration) {
	w.mu.Lock()
	b := w.batches[t.Type]
	w.mu.Unlock()
	if b == nil || !b.tryAdd() {
		b = &batchCall{h: h, typ: t.Type, maxSize: maxSize, inner: inner}
		b.tryAdd()
		if maxWait > 0 {
			w.mu.Lock()
			w.batches[t.Type] = b
			w.mu.Unlock()
			time.AfterFunc(maxWait, func() { w.closeBatch(b) })
		}
	}
	w.startTask(inner, t, b)
	for b.tryAdd() {
		select {
		case w.slots <- struct{}{}:
		default:
			b.unAdd()
			w.closeIfNoWait(b, maxWait)
			return
		}
		next := w.ready.takeType(t.Type)
		if next == nil {
			<-w.slots
			w.signalRoom()
			b.unAdd()
			break
		}
		w.startTask(inner, next, b)
	}
	w.closeIfNoWait(b, maxWait)
}

// closeIfNoWait closes b unless it waits for more tasks (MaxWait).
func (w *Worker) closeIfNoWait(b *batchCall, maxWait time.Duration) {
	if maxWait <= 0 {
		w.closeBatch(b)
	}
}

// closeBatch closes b to new tasks; its call is made once its tasks have all joined.
func (w *Worker) closeBatch(b *batchCall) {
	w.mu.Lock()
	if w.batches[b.typ] == b {
		delete(w.batches, b.typ)
	}
	w.mu.Unlock()
	b.mu.Lock()
	b.closed = true
	b.fireLocked()
	b.mu.Unlock()
}

// closeBatches closes the open batches (the starter stops: no more tasks join them).
func (w *Worker) closeBatches() {
	w.mu.Lock()
	open := make([]*batchCall, 0, len(w.batches))
	for _, b := range w.batches {
		open = append(open, b)
	}
	w.mu.Unlock()
	for _, b := range open {
		w.closeBatch(b)
	}
}

// tryAdd counts one more task started in b; false when b is closed or full.
func (b *batchCall) tryAdd() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.members >= b.maxSize {
		return false
	}
	b.members++
	return true
}

// unAdd takes back a tryAdd for which no task was started.
func (b *batchCall) unAdd() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.members--
	b.fireLocked()
}

// join is a task's run reaching the handler: it waits for the batch's call and returns the
// task's error. It waits even if the task's context ends meanwhile, so that the task holds its
// slot while the handler may still be working on it; a task whose context has ended when the
// call is made is left out of it, and gets its context's cause.
func (b *batchCall) join(ctx context.Context, r *runningTask) error {
	m := &batchMember{ctx: ctx, task: r.task, slot: ResultSlotFrom(ctx), done: make(chan struct{})}
	b.mu.Lock()
	if r.batchSettled {
		b.mu.Unlock()
		return fmt.Errorf("the batch handler of %q was called twice for task %d (a middleware called next twice?); a task joins its batch once", b.typ, r.task.ID)
	}
	r.batchSettled = true
	b.joined = append(b.joined, m)
	b.settled++
	b.fireLocked()
	b.mu.Unlock()
	<-m.done
	return m.err
}

// leave settles a task of b whose run ended without reaching the handler (nothing if it joined).
func (b *batchCall) leave(r *runningTask) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.batchSettled {
		return
	}
	r.batchSettled = true
	b.settled++
	b.fireLocked()
}

// fireLocked makes the batch's call, in a goroutine of its own, once b is closed or full and
// every task started in it has settled.
func (b *batchCall) fireLocked() {
	if (!b.closed && b.members < b.maxSize) || b.fired || b.settled < b.members {
		return
	}
	b.fired = true
	go b.call(b.joined)
}

// call runs the handler over the members whose context has not ended, and hands each its error.
// The call's context is cancelled only once every task in the call has been stopped (timed out,
// lease lost, the worker's shutdown): one task's cancellation does not stop the others' work.
func (b *batchCall) call(members []*batchMember) {
	var live []*batchMember
	for _, m := range members {
		if m.ctx.Err() != nil {
			m.err = context.Cause(m.ctx)
			close(m.done)
			continue
		}
		live = append(live, m)
	}
	if len(live) == 0 {
		return
	}
	// In claim order (the buffer's), whichever order the tasks' runs reached the handler.
	slices.SortStableFunc(live, func(x, y *batchMember) int {
		return cmp.Or(cmp.Compare(y.task.Priority, x.task.Priority), x.task.RunAt.Compare(y.task.RunAt), cmp.Compare(x.task.ID, y.task.ID))
	})
	ctx, cancel := context.WithCancelCause(b.inner)
	defer cancel(nil)
	var running atomic.Int64
	running.Store(int64(len(live)))
	tasks := make([]*tasktype.Task, len(live))
	slots := make([]*ResultSlot, len(live))
	for i, m := range live {
		tasks[i], slots[i] = m.task, m.slot
		stop := context.AfterFunc(m.ctx, func() {
			if running.Add(-1) == 0 {
				cancel(context.Cause(m.ctx))
			}
		})
		defer stop()
	}
	errs := safeWorkBatch(ctx, b.h, tasks, slots)
	if len(errs) != len(live) {
		err := fmt.Errorf("the batch handler of %q returned %d errors for a batch of %d tasks; it must return one per task, in order: every task of the batch fails",
			b.typ, len(errs), len(live))
		errs = make([]error, len(live))
		for i := range errs {
			errs[i] = err
		}
	}
	for i, m := range live {
		m.err = errs[i]
		close(m.done)
	}
}

// safeWorkBatch calls h.WorkBatch; a panic fails every task of the batch with it.
func safeWorkBatch(ctx context.Context, h BatchHandler, tasks []*tasktype.Task, slots []*ResultSlot) (errs []error) {
	defer func() {
		if v := recover(); v != nil {
			err := error(&panicError{value: fmt.Sprintf("%v (batch of %d tasks: every task of the batch fails)", v, len(tasks)), stack: debug.Stack()})
			errs = make([]error, len(tasks))
			for i := range errs {
				errs[i] = err
			}
		}
	}()
	return h.WorkBatch(ctx, tasks, slots)
}

// batchJoin is the handler a batch's task runs in place of its batch handler: it joins the batch.
type batchJoin struct {
	b *batchCall
	r *runningTask
}

func (j batchJoin) Work(ctx context.Context, _ *tasktype.Task) error { return j.b.join(ctx, j.r) }
