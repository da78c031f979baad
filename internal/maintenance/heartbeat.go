package maintenance

import (
	"context"
	"fmt"
	"log/slog"
)

// runHeartbeats registers the worker (unless it registers on its session: runSession), then
// writes a heartbeat every HeartbeatInterval: one UPDATE of the worker's row, whatever the
// number of tasks it runs, which also says whether an operator quieted this process
// (EventHeartbeat's Quiet). When the row is gone (a leader reaped the worker, which it does only
// after WorkerTimeout without a heartbeat, e.g. across a long database outage, or after its
// session was gone for the grace) or another process took the id over, it registers again.
func (m *Maintainer) runHeartbeats(ctx context.Context) {
	every(ctx, m.cfg.HeartbeatInterval, func(ctx context.Context) {
		if !m.registered.Load() {
			if !m.hasSession() {
				m.registerOnce(ctx, m.reaped.Load())
			}
			return
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout(m.cfg.HeartbeatInterval))
		defer cancel()
		var state string
		if err := m.pool.QueryRow(cctx, `select queues.heartbeat_worker_state($1, $2)`, m.cfg.WorkerID, m.instance).Scan(&state); err != nil {
			m.fail(ctx, "heartbeat", err)
			return
		}
		if state != "gone" {
			m.emit(Event{Kind: EventHeartbeat, Quiet: state == "quiet"})
			return
		}
		if !m.registered.Load() {
			return // the session was lost meanwhile: runSession registers again
		}
		m.log.Warn("maintenance: this worker was reaped (no heartbeat within the worker timeout, or its session gone for the grace) or its id taken over; its running tasks were recovered and their outcomes will be refused; registering again",
			slog.Duration("worker_timeout", m.cfg.WorkerTimeout), slog.Duration("session_grace", m.cfg.SessionGrace))
		m.reaped.Store(true)
		m.registered.Store(false)
		if m.hasSession() {
			m.requestSessionReset()
			return
		}
		m.registerOnce(ctx, true)
	})
}

// registerOnce registers the worker without a session; on failure the next heartbeat tick
// tries again.
func (m *Maintainer) registerOnce(ctx context.Context, again bool) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout(m.cfg.HeartbeatInterval))
	defer cancel()
	recovered, err := m.registerOn(cctx, m.pool, false)
	if err != nil {
		m.fail(ctx, "register", fmt.Errorf("register worker: %w", err))
		return
	}
	if recovered > 0 {
		m.log.Warn("maintenance: took over this worker id from a previous process that is gone; its running tasks were recovered",
			slog.Int("tasks_recovered", recovered))
	}
	m.registered.Store(true)
	m.reaped.Store(false)
	// Again also when the session path gave its session up and this heartbeat registered first.
	again = m.everRegistered.Swap(true) || again
	m.emit(Event{Kind: EventRegistered, Reregistered: again, Tasks: recovered})
	m.wakeLeadership()
}
