package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/taskorch/taskorch/internal/dispatch"
	"github.com/taskorch/taskorch/tasktype"
	"github.com/taskorch/taskorch/transport"
)

// delivery is a worker's side of a message transport (WorkerConfig.Transport; package
// transport, docs/transports.md). The worker receives task ids, claims them in the database
// (queues.claim_tasks_by_id: exactly one claim wins; the messages of the others are refused and
// acknowledged), runs them, and acknowledges each message only after the task's outcome is
// committed. Its dispatcher sends the ids of due tasks. While the transport is unreachable the
// worker claims from PostgreSQL as the postgres transport does, and goes back to the transport
// when a probe finds it again.
type delivery struct {
	w      *Worker
	tr     transport.Transport
	health *dispatch.Health
	disp   *dispatch.Dispatcher
	log    *slog.Logger

	acks       chan transport.Message
	ackMu      sync.RWMutex // held to send on acks; stop closes it under the write lock
	acksClosed bool

	mu   sync.Mutex
	held map[int64]*heldTask // claimed tasks' messages, by task id, until their outcome is committed

	stopExtend context.CancelFunc
	wg         sync.WaitGroup
	ackerDone  chan struct{}
}

// heldTask is the messages of a running task, to acknowledge once its outcome is committed.
type heldTask struct {
	msgs []transport.Message
}

const (
	probeInterval    = 500 * time.Millisecond // first probe of an unreachable transport, doubling...
	maxProbeInterval = 5 * time.Second        // ...up to this
	maxAckBatch      = 1000
)

// newDelivery prepares the worker's transport side (nil without a transport); open opens the
// transport. Config.Transport was validated (taskorch.WorkerConfig).
func newDelivery(w *Worker) *delivery {
	if w.cfg.Transport == nil {
		return nil
	}
	name := w.cfg.Transport.Name()
	return &delivery{
		w: w, tr: w.cfg.Transport, log: w.log.With("transport", name),
		health: dispatch.NewHealth(),
		acks:   make(chan transport.Message, 4*w.cfg.Concurrency+maxAckBatch),
		held:   map[int64]*heldTask{},
	}
}

// open opens the transport for this worker (its id as the consumer, the hold its lease needs)
// and makes the dispatcher. It does not connect: start pings.
func (d *delivery) open(ctx context.Context) error {
	c := d.w.cfg
	err := d.tr.Open(ctx, transport.OpenOptions{Consumer: c.ID, Hold: dispatch.HoldFor(c.LeaseDuration), Logger: d.log})
	if err != nil {
		return fmt.Errorf("opening the %s transport: %w", d.tr.Name(), err)
	}
	d.health.OnDown = func(err error) {
		d.w.obs.event(tasktype.WorkerEvent{Kind: tasktype.EventFallback, On: true})
		d.log.Warn("transport unreachable; claiming from PostgreSQL (polling) until it is back", "error", err)
	}
	d.health.OnUp = func(outage time.Duration) {
		d.w.obs.event(tasktype.WorkerEvent{Kind: tasktype.EventFallback, On: false})
		d.log.Info("transport is back; receiving from it again, and sending again what was dispatched before", "outage", outage.Round(time.Millisecond))
		d.disp.RedispatchAll() // the transport may have lost what it held
	}
	var announce func(context.Context) (bool, error)
	if !c.PollOnly {
		announce = d.w.announceWaiting // wake-ups come only while a worker says it waits
	}
	d.disp = dispatch.NewDispatcher(d.w.pool, dispatch.DispatcherConfig{
		Transport: d.tr, Health: d.health, TaskTypes: d.w.types, RedispatchAfter: c.RedispatchAfter,
		PollInterval: c.PollInterval, MaxPollInterval: c.MaxPollInterval, Logger: d.log,
		OnSent:         d.counter(tasktype.EventMessagesSent),
		OnRedispatched: d.counter(tasktype.EventMessagesRedispatched),
		OnSendFailed:   d.counter(tasktype.EventSendFailed),
		Announce:       announce,
	})
	return nil
}

// start checks the transport (falling back at once if it does not answer) and starts the
// dispatcher, the prober, the acknowledger and the visibility extender. The dispatcher and the
// prober stop with ctx; the others with stop.
func (d *delivery) start(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := d.tr.Ping(pctx)
	cancel()
	if err != nil && ctx.Err() == nil {
		d.health.MarkDown(err)
	}
	d.wg.Go(func() { d.disp.Run(ctx) })
	d.wg.Go(func() { d.health.RunProber(ctx, d.tr.Ping, probeInterval, maxProbeInterval) })
	extendCtx, stopExtend := context.WithCancel(context.WithoutCancel(ctx))
	d.stopExtend = stopExtend
	d.wg.Go(func() { d.runExtender(extendCtx) })
	d.ackerDone = make(chan struct{})
	go func() { defer close(d.ackerDone); d.runAcker(context.WithoutCancel(ctx)) }()
}

// stop waits for the dispatcher and the prober (their ctx is done), flushes the
// acknowledgements and closes the transport. Call it after the completer has finished.
func (d *delivery) stop() {
	if d.stopExtend != nil {
		d.stopExtend()
	}
	d.wg.Wait()
	d.ackMu.Lock()
	d.acksClosed = true
	close(d.acks)
	d.ackMu.Unlock()
	if d.ackerDone != nil {
		select {
		case <-d.ackerDone:
		case <-time.After(15 * time.Second):
			d.log.Warn("acknowledgements not flushed at shutdown; the transport will deliver them again and they will be refused")
		}
	}
	_ = d.tr.Close()
}

// counter returns a function that reports n messages of kind to the observers.
func (d *delivery) counter(kind tasktype.WorkerEventKind) func(n int) {
	return func(n int) { d.w.obs.event(tasktype.WorkerEvent{Kind: kind, N: n}) }
}

// receive is the transport source of the fetch loop (fetch.go): it receives up to n messages on
// ctx and claims their tasks on inner (queues.claim_tasks_by_id, through the one claim path), and
// returns those claimed. Each claimed task keeps the message it was claimed by, acknowledged once
// its outcome is committed (outcomeRecorded); every other message is refused and acknowledged. A
// receive error marks the transport down (and is not returned); a claim error is returned, the
// messages left unacknowledged.
func (d *delivery) receive(ctx, inner context.Context, n int) ([]*tasktype.Task, error) {
	msgs, err := d.tr.Receive(ctx, n)
	if err != nil {
		if ctx.Err() == nil {
			d.health.MarkDown(err)
		}
		return nil, nil
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	d.w.obs.event(tasktype.WorkerEvent{Kind: tasktype.EventMessagesReceived, N: len(msgs)})
	ids := make([]int64, 0, len(msgs))
	seen := make(map[int64]bool, len(msgs))
	for _, m := range msgs {
		if !seen[m.TaskID] {
			seen[m.TaskID] = true
			ids = append(ids, m.TaskID)
		}
	}
	// The claim runs on inner, not ctx: stopping never cancels a claim in flight (fetch.go).
	// Claimed after the stop signal, the tasks are given back by the fetch loop, and their
	// messages, unacknowledged, come back to be claimed again.
	tasks, err := d.w.claim(inner, claimByID, 0, ids)
	if err != nil || ctx.Err() != nil {
		return tasks, err
	}
	claimed := make(map[int64]*heldTask, len(tasks))
	for _, t := range tasks {
		claimed[t.ID] = &heldTask{}
	}
	// Each claimed task keeps the message it was claimed by; every other message is refused: its
	// task was claimed by another worker (or by another copy of it in this batch), finished,
	// not due, paused, or of a type this worker does not claim (a worker that claims it sends it
	// again: its reclaimer). The database decided; the message has nothing more to say.
	var refused []transport.Message
	for _, m := range msgs {
		if h := claimed[m.TaskID]; h != nil && len(h.msgs) == 0 {
			h.msgs = append(h.msgs, m)
		} else {
			refused = append(refused, m)
		}
	}
	d.mu.Lock()
	for id, h := range claimed {
		d.held[id] = h
	}
	d.mu.Unlock()
	if len(refused) > 0 {
		d.w.obs.event(tasktype.WorkerEvent{Kind: tasktype.EventMessagesRefused, N: len(refused)})
		d.ack(refused)
	}
	if len(tasks) > 0 {
		d.disp.Refill() // room in the dispatch window
	}
	return tasks, nil
}

// ack queues messages for acknowledgement. After stop (a handler that outlived the shutdown)
// they are left to be delivered again and refused.
func (d *delivery) ack(msgs []transport.Message) {
	d.ackMu.RLock()
	defer d.ackMu.RUnlock()
	if d.acksClosed {
		return
	}
	for _, m := range msgs {
		d.acks <- m
	}
}

// runAcker acknowledges queued messages in batches until d.acks is closed and drained.
func (d *delivery) runAcker(ctx context.Context) {
	batch := make([]transport.Message, 0, maxAckBatch)
	for m := range d.acks {
		batch = append(batch[:0], m)
	drain:
		for len(batch) < maxAckBatch {
			select {
			case m, ok := <-d.acks:
				if !ok {
					break drain
				}
				batch = append(batch, m)
			default:
				break drain
			}
		}
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := d.tr.Ack(actx, batch)
		cancel()
		if err != nil {
			// Unacknowledged messages come back after their hold and are refused at the claim.
			if !d.health.IsDown() {
				d.log.Warn("acknowledging messages failed; they will be delivered again and refused", "messages", len(batch), "error", err)
			}
			continue
		}
		d.w.obs.event(tasktype.WorkerEvent{Kind: tasktype.EventMessagesAcked, N: len(batch)})
	}
}

// runExtender keeps the messages of running tasks held (SQS visibility, Redis idle time) every
// LeaseDuration/3, as the renewer keeps their leases.
func (d *delivery) runExtender(ctx context.Context) {
	tick := time.NewTicker(max(d.w.cfg.LeaseDuration/3, 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		d.mu.Lock()
		var msgs []transport.Message
		for _, h := range d.held {
			msgs = append(msgs, h.msgs...)
		}
		d.mu.Unlock()
		if len(msgs) == 0 || d.health.IsDown() {
			continue
		}
		if err := d.tr.Extend(ctx, msgs); err != nil && !errors.Is(err, context.Canceled) {
			d.log.Debug("extending held messages failed; they may be delivered again and refused", "messages", len(msgs), "error", err)
		}
	}
}
