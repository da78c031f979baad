package taskorch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/taskorch/taskorch/internal/dispatch"
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
	m      *transportMetrics
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
	claimByIDSQL = `select ` + taskColumns + ` from queues.claim_tasks_by_id($1, $2, $3::interval, $4)`

	probeInterval    = 500 * time.Millisecond // first probe of an unreachable transport, doubling...
	maxProbeInterval = 5 * time.Second        // ...up to this
	maxAckBatch      = 1000
)

// newDelivery prepares the worker's transport side (nil without a transport); open opens the
// transport. WorkerConfig.Transport was validated (withDefaults).
func newDelivery(w *Worker) (*delivery, error) {
	if w.cfg.Transport == nil {
		return nil, nil
	}
	name := w.cfg.Transport.Name()
	m, err := newTransportMetrics(w.cfg.Registerer, name)
	if err != nil {
		return nil, err
	}
	return &delivery{
		w: w, tr: w.cfg.Transport, m: m, log: w.log.With("transport", name),
		health: dispatch.NewHealth(),
		acks:   make(chan transport.Message, 4*w.cfg.Concurrency+maxAckBatch),
		held:   map[int64]*heldTask{},
	}, nil
}

// open opens the transport for this worker (its id as the consumer, the hold its lease needs)
// and makes the dispatcher. It does not connect: start pings.
func (d *delivery) open(ctx context.Context) error {
	c := d.w.cfg
	err := d.tr.Open(ctx, transport.OpenOptions{Consumer: c.ID, Hold: dispatch.HoldFor(c.LeaseDuration), Logger: d.log})
	if err != nil {
		return fmt.Errorf("opening the %s transport: %w", d.tr.Name(), err)
	}
	var types []string
	if !c.ClaimUnknownTypes {
		types = knownTypes(c)
	}
	d.health.OnDown = func(err error) {
		d.m.setFallback(true)
		d.log.Warn("transport unreachable; claiming from PostgreSQL (polling) until it is back", "error", err)
	}
	d.health.OnUp = func(outage time.Duration) {
		d.m.setFallback(false)
		d.log.Info("transport is back; receiving from it again, and sending again what was dispatched before", "outage", outage.Round(time.Millisecond))
		d.disp.RedispatchAll() // the transport may have lost what it held
	}
	var announce func(context.Context) (bool, error)
	if !c.PollOnly {
		announce = d.w.announceWaiting // wake-ups come only while a worker says it waits
	}
	d.disp = dispatch.NewDispatcher(d.w.pool, dispatch.DispatcherConfig{
		Transport: d.tr, Health: d.health, TaskTypes: types, RedispatchAfter: c.RedispatchAfter,
		PollInterval: c.PollInterval, MaxPollInterval: c.MaxPollInterval, Logger: d.log,
		OnSent: d.m.sentN, OnRedispatched: d.m.redispatchedN, OnSendFailed: d.m.sendFailedN,
		Announce: announce,
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

// runTransportFetcher receives task ids and claims them while there are free slots, until ctx is
// done; while the transport is down it claims from PostgreSQL instead (runFetcher).
func (w *Worker) runTransportFetcher(ctx, inner context.Context) {
	d := w.dl
	var types []string
	if !w.cfg.ClaimUnknownTypes {
		types = knownTypes(w.cfg)
	}
	lease := w.cfg.LeaseDuration.String()
	backoff := w.cfg.PollInterval
	for ctx.Err() == nil {
		if d.health.IsDown() {
			w.runFetcher(ctx, inner, d.health.Up())
			continue
		}
		n := w.takeSlots(ctx, nil)
		if n == 0 {
			return
		}
		started, err := w.receiveAndClaim(ctx, inner, n, lease, types)
		for range n - started {
			<-w.slots
		}
		if err == nil {
			backoff = w.cfg.PollInterval
			continue
		}
		if ctx.Err() != nil {
			return
		}
		w.log.Warn("claiming received tasks failed; retrying", "error", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, w.cfg.MaxPollInterval)
	}
}

// receiveAndClaim receives up to n messages, claims their tasks and starts those claimed (their
// slots are taken). It returns how many it started. A receive error marks the transport down
// (and is not returned); a claim error is returned, the messages left unacknowledged.
func (w *Worker) receiveAndClaim(ctx, inner context.Context, n int, lease string, types []string) (int, error) {
	d := w.dl
	msgs, err := d.tr.Receive(ctx, n)
	if err != nil {
		if ctx.Err() == nil {
			d.health.MarkDown(err)
		}
		return 0, nil
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	d.m.receivedN(len(msgs))
	ids := make([]int64, 0, len(msgs))
	seen := make(map[int64]bool, len(msgs))
	for _, m := range msgs {
		if !seen[m.TaskID] {
			seen[m.TaskID] = true
			ids = append(ids, m.TaskID)
		}
	}
	// The claim runs on inner, not ctx: stopping never cancels a claim in flight (see
	// runFetcher). Claimed after the stop signal, the tasks are not started: the shutdown gives
	// them back, and their messages, unacknowledged, come back to be claimed again.
	cctx, cancel := context.WithTimeout(inner, claimTimeout)
	defer cancel()
	rows, err := w.pool.Query(cctx, claimByIDSQL, w.cfg.ID, ids, lease, types)
	var tasks []*Task
	if err == nil {
		tasks, err = w.collectClaimed(cctx, rows)
	}
	if err != nil {
		return 0, err
	}
	if ctx.Err() != nil {
		return 0, nil
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
		d.m.refusedN(len(refused))
		d.ack(refused)
	}
	for _, t := range tasks {
		w.start(inner, t)
	}
	if len(tasks) > 0 {
		d.disp.Refill() // room in the dispatch window
	}
	return len(tasks), nil
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
		d.m.ackedN(len(batch))
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
