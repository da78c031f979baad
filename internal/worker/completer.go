package worker

import (
	"context"
	"sync"

	"github.com/taskorch/taskorch/tasktype"
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

// completers is how many batches of completions a worker writes at once. With one, a batch
// whose statement takes long (a completion that releases a workflow's children, or one waiting
// on a row lock) holds back every completion behind it while the worker's other slots keep
// finishing; with two, the next batch is written meanwhile, on another connection. Two
// completions of one task are never written at once: a task is sent once.
const completers = 2

// runCompleter records completions in batches: one statement for everything that finished since
// the last one, up to completers statements at a time. Under load that is many tasks per round
// trip; when idle, a single completion is written at once. Each task is finished (outcome.go)
// once its batch is written. It returns when the queue is closed and drained.
func (w *Worker) runCompleter(ctx context.Context) {
	var wg sync.WaitGroup
	for range completers {
		wg.Go(func() { w.runCompletions(ctx) })
	}
	wg.Wait()
}

// runCompletions is one of runCompleter's writers: it takes what has queued up, writes it, and
// comes back for more, until the queue is closed and drained.
func (w *Worker) runCompletions(ctx context.Context) {
	batch := make([]*runningTask, 0, maxCompletionBatch)
	outs := make([]outcome, maxCompletionBatch) // the batch's outcomes, reused
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
		w.flushCompletions(ctx, batch, outs)
	}
}

// flushCompletions has a batch written (writer.go): plain completions in one statement, and
// those with a success handler in transactions of up to maxHandlerBatch; then finishes each
// task. When a success handler raises, its batch is rolled back and each of its tasks runs
// alone (finishAlone), so only the raising one fails. outs holds the outcomes while they are
// written and finished (finish keeps none).
func (w *Worker) flushCompletions(ctx context.Context, batch []*runningTask, outs []outcome) {
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
		w.writeCompletions(ctx, plain, outs[:len(plain)])
		for i, r := range plain {
			w.finish(r, &outs[i])
		}
		clear(outs[:len(plain)])
	}
	for len(handled) > 0 {
		n := min(len(handled), maxHandlerBatch)
		raised := w.writeHandlerBatch(ctx, handled[:n], outs[:n])
		for i, r := range handled[:n] {
			if raised {
				w.finishAlone(r)
			} else {
				w.finish(r, &outs[i])
			}
		}
		clear(outs[:n])
		handled = handled[n:]
	}
}

// finishAlone runs one task's success handler and completion in a transaction of its own, and
// records what came of it.
func (w *Worker) finishAlone(r *runningTask) {
	o := w.finishWithHandler(r.ctx, r.task, r.handler, r.handlerBody, "", "")
	if o.kind == outcomeComplete { // never: inLeaseTx writes its completion
		o = written(tasktype.StatusCompleted)
	}
	w.record(r.ctx, r, o)
}
