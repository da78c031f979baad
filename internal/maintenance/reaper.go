package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// Causes of a ReapedWorker.
const (
	CauseHeartbeat = "heartbeat" // no heartbeat within the worker timeout
	CauseSession   = "session"   // its session gone for the grace
)

// ReapedWorker is a worker a leader found dead, with the tasks it recovered.
type ReapedWorker struct {
	WorkerID string
	// Cause says how it was found dead: CauseHeartbeat or CauseSession.
	Cause string
	// LastHeartbeat is its last heartbeat (CauseHeartbeat); LostAt when the leader first found
	// its session gone (CauseSession).
	LastHeartbeat  time.Time
	LostAt         time.Time
	TasksRecovered int // returned from running: to pending, or to dead on their last attempt
	TasksDead      int // of which dead
}

// runReaper, while this worker is the leader, removes workers that have not heartbeated for
// WorkerTimeout and recovers their running tasks, every HeartbeatInterval.
func (m *Maintainer) runReaper(ctx context.Context) {
	every(ctx, m.cfg.HeartbeatInterval, func(ctx context.Context) {
		term := m.Term()
		if term == 0 {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout(m.cfg.LeaderTTL))
		defer cancel()
		reaped, err := ReapDeadWorkers(cctx, m.pool, m.cfg.WorkerTimeout, term)
		if err != nil {
			m.fail(ctx, "reap", err)
			return
		}
		tasks := 0
		for _, w := range reaped {
			tasks += w.TasksRecovered
			m.log.Warn("maintenance: reaped a worker that stopped heartbeating; its running tasks were recovered",
				slog.String("reaped_worker_id", w.WorkerID), slog.Time("last_heartbeat", w.LastHeartbeat),
				slog.Int("tasks_recovered", w.TasksRecovered), slog.Int("tasks_dead", w.TasksDead))
		}
		m.emit(Event{Kind: EventReaped, Term: term, Workers: reaped, Tasks: tasks})
	})
}

// ReapDeadWorkers calls queues.reap_dead_workers: as the leader of term, it removes the workers
// whose last heartbeat is older than timeout and recovers their running tasks. Under a stale
// term it does nothing and returns none.
func ReapDeadWorkers(ctx context.Context, db DB, timeout time.Duration, term int64) ([]ReapedWorker, error) {
	rows, err := db.Query(ctx,
		`select worker_id, last_heartbeat, tasks_recovered, tasks_dead from queues.reap_dead_workers($1, $2)`,
		timeout, term)
	if err != nil {
		return nil, fmt.Errorf("reap dead workers: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReapedWorker, error) {
		var w ReapedWorker
		w.Cause = CauseHeartbeat
		err := r.Scan(&w.WorkerID, &w.LastHeartbeat, &w.TasksRecovered, &w.TasksDead)
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("reap dead workers: %w", err)
	}
	return out, nil
}

// runSessionReaper, while this worker is the leader, recovers the running tasks of the workers
// whose session has been gone for SessionGrace, every SessionCheckInterval.
func (m *Maintainer) runSessionReaper(ctx context.Context) {
	grace := max(m.cfg.SessionGrace, 0) // NoGrace
	every(ctx, m.cfg.SessionCheckInterval, func(ctx context.Context) {
		term := m.Term()
		if term == 0 {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout(m.cfg.LeaderTTL))
		defer cancel()
		reaped, err := ReapLostSessions(cctx, m.pool, grace, term)
		if err != nil {
			m.fail(ctx, "session_reap", err)
			return
		}
		m.emit(Event{Kind: EventSessionCheck, Term: term, Workers: reaped})
		if len(reaped) == 0 {
			return
		}
		tasks := 0
		for _, w := range reaped {
			tasks += w.TasksRecovered
			m.log.Warn("maintenance: a worker's session is gone; its running tasks were recovered",
				slog.String("reaped_worker_id", w.WorkerID), slog.Time("session_lost_at", w.LostAt),
				slog.Int("tasks_recovered", w.TasksRecovered), slog.Int("tasks_dead", w.TasksDead))
		}
		m.emit(Event{Kind: EventReaped, Term: term, Workers: reaped, Tasks: tasks})
	})
}

// ReapLostSessions calls queues.reap_lost_sessions: as the leader of term, it recovers the
// running tasks of the workers whose session has been gone for grace, and removes them. Under
// a stale term it does nothing and returns none.
func ReapLostSessions(ctx context.Context, db DB, grace time.Duration, term int64) ([]ReapedWorker, error) {
	rows, err := db.Query(ctx,
		`select worker_id, session_lost_at, tasks_recovered, tasks_dead from queues.reap_lost_sessions($1, $2)`,
		grace, term)
	if err != nil {
		return nil, fmt.Errorf("reap lost sessions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReapedWorker, error) {
		w := ReapedWorker{Cause: CauseSession}
		var lost *time.Time
		err := r.Scan(&w.WorkerID, &lost, &w.TasksRecovered, &w.TasksDead)
		if lost != nil {
			w.LostAt = *lost
		}
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("reap lost sessions: %w", err)
	}
	return out, nil
}
