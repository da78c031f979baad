// Package batcher groups concurrent calls into batches, as a database groups concurrent commits:
// a call that arrives while no batch runs starts one at once (no waiting, no timer), and every
// call that arrives while a batch runs goes into the next. Under load the batches grow to
// match the rate of arrivals; alone, a call costs one round trip, as before.
//
// The worker batches its before handlers with it and the dev outbox provider its recordings
// (docs/worker.md, "Before handlers and provider calls in batches").
package batcher

import (
	"context"
	"sync"
	"time"
)

// Result is one call's answer within a batch.
type Result[Resp any] struct {
	Value Resp
	Err   error
}

// RunFunc runs one batch: it returns one Result per request, in the same order, or an error
// that answers every call of the batch.
type RunFunc[Req, Resp any] func(ctx context.Context, reqs []Req) ([]Result[Resp], error)

// Batcher batches calls to a RunFunc. Its zero value is not usable: see New. A Batcher holds
// no goroutine while idle: the one that runs batches exits when none is waiting.
type Batcher[Req, Resp any] struct {
	run RunFunc[Req, Resp]
	max int

	mu      sync.Mutex
	waiting []*call[Req, Resp]
	running bool
}

type call[Req, Resp any] struct {
	ctx  context.Context
	req  Req
	res  Result[Resp]
	done chan struct{}
}

// New returns a Batcher that runs at most max calls in one batch (max < 1 means 1).
func New[Req, Resp any](max int, run RunFunc[Req, Resp]) *Batcher[Req, Resp] {
	if max < 1 {
		max = 1
	}
	return &Batcher[Req, Resp]{run: run, max: max}
}

// Do makes one call, in the next batch, and waits for its answer or for ctx to end. A call
// whose ctx ends before its batch starts is left out of it; one whose ctx ends while its batch
// runs returns ctx's error, and its request may still have been run.
func (b *Batcher[Req, Resp]) Do(ctx context.Context, req Req) (Resp, error) {
	c := &call[Req, Resp]{ctx: ctx, req: req, done: make(chan struct{})}
	b.mu.Lock()
	b.waiting = append(b.waiting, c)
	if !b.running {
		b.running = true
		go b.loop()
	}
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.res.Value, c.res.Err
	case <-ctx.Done():
		var zero Resp
		return zero, context.Cause(ctx)
	}
}

// loop runs batches until no call waits.
func (b *Batcher[Req, Resp]) loop() {
	for {
		b.mu.Lock()
		n := min(len(b.waiting), b.max)
		if n == 0 {
			b.running = false
			b.waiting = nil
			b.mu.Unlock()
			return
		}
		batch := make([]*call[Req, Resp], 0, n)
		for _, c := range b.waiting[:n] {
			if c.ctx.Err() == nil {
				batch = append(batch, c)
			}
		}
		b.waiting = b.waiting[n:]
		b.mu.Unlock()
		if len(batch) > 0 {
			b.runBatch(batch)
		}
	}
}

// maxBatchTime bounds a batch none of whose calls has a deadline: a batch that hangs (a
// database that stopped answering) must not hold every later call behind it for ever.
const maxBatchTime = time.Minute

// runBatch runs one batch with a context that carries the first call's values, ends at the
// latest of the calls' deadlines (at most maxBatchTime from now if any call has none), and is
// not cancelled by any one call: the others still want their answers.
func (b *Batcher[Req, Resp]) runBatch(batch []*call[Req, Resp]) {
	latest := time.Time{}
	for _, c := range batch {
		d, ok := c.ctx.Deadline()
		if !ok {
			latest = time.Now().Add(maxBatchTime)
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(batch[0].ctx), latest)
	defer cancel()
	reqs := make([]Req, len(batch))
	for i, c := range batch {
		reqs[i] = c.req
	}
	results, err := b.run(ctx, reqs)
	for i, c := range batch {
		switch {
		case err != nil:
			c.res.Err = err
		case i < len(results):
			c.res = results[i]
		default:
			c.res.Err = errShort
		}
		close(c.done)
	}
}

// errShort answers a call its batch's RunFunc forgot: a bug in the RunFunc, not in the call.
var errShort = shortError{}

type shortError struct{}

func (shortError) Error() string { return "batcher: the batch returned fewer results than calls" }

// Waiting is how many calls wait for a batch to start; for tests and metrics.
func (b *Batcher[Req, Resp]) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiting)
}

// Running reports whether a goroutine runs batches now.
func (b *Batcher[Req, Resp]) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running
}
