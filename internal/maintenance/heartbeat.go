package maintenance

import (
	"context"
	"fmt"
	"log/slog"
)

// runHeartbeats registers the worker, then writes a heartbeat every HeartbeatInterval: one
// UPDATE of the worker's row, whatever the number of tasks it runs. When the row is gone (a
// leader reaped the worker, which it does only after WorkerTimeout without a heartbeat, e.g.
// across a long database outage) it registers again.
func (m *Maintainer) runHeartbeats(ctx context.Context) {
	every(ctx, m.cfg.HeartbeatInterval, func(ctx context.Context) {
		if !m.registered.Load() {
			m.registerOnce(ctx, m.reaped.Load())
			return
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout(m.cfg.HeartbeatInterval))
		defer cancel()
		var alive bool
		if err := m.pool.QueryRow(cctx, `select queues.heartbeat_worker($1)`, m.cfg.WorkerID).Scan(&alive); err != nil {
			m.fail(ctx, "heartbeat", err)
			return
		}
		if alive {
			m.emit(Event{Kind: EventHeartbeat})
			return
		}
		m.log.Warn("maintenance: this worker was reaped (no heartbeat within the worker timeout); its running tasks were recovered and their outcomes will be refused; registering again",
			slog.Duration("worker_timeout", m.cfg.WorkerTimeout))
		m.reaped.Store(true)
		m.registered.Store(false)
		m.registerOnce(ctx, true)
	})
}

// registerOnce registers the worker; on failure the next heartbeat tick tries again.
func (m *Maintainer) registerOnce(ctx context.Context, again bool) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout(m.cfg.HeartbeatInterval))
	defer cancel()
	if err := m.register(cctx); err != nil {
		m.fail(ctx, "register", fmt.Errorf("register worker: %w", err))
		return
	}
	m.registered.Store(true)
	m.reaped.Store(false)
	m.emit(Event{Kind: EventRegistered, Reregistered: again})
}
