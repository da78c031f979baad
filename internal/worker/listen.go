package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/taskorch/taskorch/tasktype"
)

// The LISTEN connection: NOTIFY taskorch_task wakes the fetch loop (and, with a transport, the
// dispatcher); NOTIFY taskorch_cancel names a task cancelled while it runs (lease_check.go).

// Wake-ups (docs/worker.md, "The loop"): an enqueue notifies only while a worker says it waits.
// The claim after which the fetch loop waits is sent after queues.worker_waiting, in the same
// batch (claimAnnounced, claim.go); the dispatcher of a transport announces before its pass
// (announceWaiting).

// workerWaitingSQL tells the database this worker is about to wait for NOTIFY taskorch_task: the
// next enqueue notifies. It answers false when an enqueue that began before it is still in
// flight.
const workerWaitingSQL = `select queues.worker_waiting()`

// announceWaiting calls queues.worker_waiting before a pass after which the caller may wait:
// clear is false when an enqueue was in flight, whose task may commit after the pass without a
// notification.
func (w *Worker) announceWaiting(ctx context.Context) (clear bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	err = w.pool.QueryRow(ctx, workerWaitingSQL).Scan(&clear)
	return clear, err
}

// runListener holds a LISTEN connection (taskorch_task and taskorch_cancel) and turns
// notifications into wake-ups and lease checks, reconnecting with backoff when the connection
// drops. Polling covers the gaps; after a reconnect the running tasks' leases are checked once.
// first, when not nil, is a connection already listening (Run opened and checked it).
func (w *Worker) runListener(ctx context.Context, first *pgx.Conn) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		pc := first
		first = nil
		var err error
		if pc == nil {
			pc, err = w.openListen(ctx)
		}
		if err == nil {
			backoff = 100 * time.Millisecond
			w.listening.Store(true)
			w.signalWake()       // anything enqueued while we were not listening
			w.signalLeaseCheck() // anything cancelled while we were not listening
			err = w.listen(ctx, pc)
			w.listening.Store(false)
		}
		if ctx.Err() != nil {
			return
		}
		w.log.Warn("LISTEN connection lost; polling until it is back", "error", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// openListen opens the LISTEN connection: a connection of the pool taken out of it for good
// (it keeps session state), or with ListenConfig a direct connection, checked with a probe.
func (w *Worker) openListen(ctx context.Context) (*pgx.Conn, error) {
	var pc *pgx.Conn
	if w.cfg.ListenConfig != nil {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c, err := pgx.ConnectConfig(cctx, w.cfg.ListenConfig)
		if err != nil {
			return nil, fmt.Errorf("connect for LISTEN: %w", err)
		}
		pc = c
	} else {
		conn, err := w.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		pc = conn.Hijack()
	}
	for _, sql := range []string{"listen taskorch_task", "listen " + cancelChannel} {
		if _, err := pc.Exec(ctx, sql); err != nil {
			_ = pc.Close(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	if w.cfg.ListenConfig != nil {
		if err := w.probeListen(ctx, pc); err != nil {
			_ = pc.Close(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	return pc, nil
}

// listenProbeTimeout bounds the wait for the probe's NOTIFY on a direct LISTEN connection.
const listenProbeTimeout = 5 * time.Second

// probeListen checks that a NOTIFY sent through the pool reaches pc: it does not when pc goes
// through a transaction-pooling proxy (its server connection changes between transactions) or
// to another server than the pool's.
func (w *Worker) probeListen(ctx context.Context, pc *pgx.Conn) error {
	if _, err := pc.Exec(ctx, "listen taskorch_listen_probe"); err != nil {
		return err
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	token := w.cfg.ID + "/" + hex.EncodeToString(b)
	if _, err := w.pool.Exec(ctx, "select pg_notify('taskorch_listen_probe', $1)", token); err != nil {
		return fmt.Errorf("send the LISTEN probe: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, listenProbeTimeout)
	defer cancel()
	for {
		n, err := pc.WaitForNotification(pctx)
		if err != nil {
			if ctx.Err() == nil && pctx.Err() != nil {
				return fmt.Errorf("%w: a NOTIFY sent through the pool did not arrive on the LISTEN connection within %s: "+
					"it must reach the same PostgreSQL directly, not through a transaction-pooling proxy", tasktype.ErrListenProbe, listenProbeTimeout)
			}
			return err
		}
		if n.Channel == "taskorch_listen_probe" && n.Payload == token {
			break
		}
		if n.Channel != "taskorch_listen_probe" {
			w.notified(n)
		}
	}
	_, err := pc.Exec(ctx, "unlisten taskorch_listen_probe")
	return err
}

// listen turns notifications on pc into wake-ups and lease checks until pc fails or ctx is
// done; it closes pc.
func (w *Worker) listen(ctx context.Context, pc *pgx.Conn) error {
	defer func() { _ = pc.Close(context.WithoutCancel(ctx)) }()
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		w.notified(n)
	}
}

// notified handles one notification: new tasks (taskorch_task) wake the fetcher; a cancelled
// task (taskorch_cancel) may stop one of the running ones (lease_check.go).
func (w *Worker) notified(n *pgconn.Notification) {
	if n.Channel == cancelChannel {
		w.cancelNotified(n.Payload)
		return
	}
	w.obs.event(tasktype.WorkerEvent{Kind: tasktype.EventNotified})
	w.signalWake()
}

func (w *Worker) signalWake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
	if w.dl != nil {
		w.dl.disp.Wake() // with a transport, new tasks are the dispatcher's to send
	}
}
