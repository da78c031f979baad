package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// ScheduleTickKey returns the idempotency key of a schedule's tick, the one the leader enqueues
// its task with: schedule:<name>:<tick in UTC, RFC 3339>.
func ScheduleTickKey(name string, tick time.Time) string {
	return "schedule:" + name + ":" + tick.UTC().Truncate(time.Second).Format(time.RFC3339)
}

// runScheduler, while this worker is the leader, enqueues the due ticks of the schedules every
// ScheduleInterval.
func (m *Maintainer) runScheduler(ctx context.Context) {
	every(ctx, m.cfg.ScheduleInterval, func(ctx context.Context) {
		term := m.Term()
		if term == 0 {
			return
		}
		if err := m.enqueueDueTicks(ctx, term); err != nil {
			m.fail(ctx, "schedule", err)
		}
	})
}

// dueSchedule is a row of queues.due_schedules.
type dueSchedule struct {
	name, cron string
	next       *time.Time
}

// enqueueDueTicks enqueues, as the leader of term, the due tick of every schedule. The catch-up
// policy: when several ticks of a schedule were missed (no leader, a long outage), only the most
// recent one is enqueued, and the next is the first after now. A schedule just added from SQL
// without a next_run_at gets the first tick after now, enqueuing nothing.
func (m *Maintainer) enqueueDueTicks(ctx context.Context, term int64) error {
	now := m.cfg.Now().UTC()
	cctx, cancel := context.WithTimeout(ctx, callTimeout(m.cfg.LeaderTTL))
	defer cancel()
	rows, err := m.pool.Query(cctx, `select name, cron, next_run_at from queues.due_schedules($1)`, now)
	if err != nil {
		return fmt.Errorf("read due schedules: %w", err)
	}
	due, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (dueSchedule, error) {
		var d dueSchedule
		err := r.Scan(&d.name, &d.cron, &d.next)
		return d, err
	})
	if err != nil {
		return fmt.Errorf("read due schedules: %w", err)
	}
	for _, d := range due {
		if m.Term() != term {
			return nil
		}
		c, ok := m.parseScheduleCron(d)
		if !ok {
			continue
		}
		var tick *time.Time
		next := c.Next(now)
		if d.next != nil {
			if t, ok := c.lastTick(*d.next, now); ok {
				tick, next = &t, c.Next(t)
			}
		}
		if next.IsZero() {
			m.log.Warn("maintenance: schedule has no tick within five years; leaving it", slog.String("schedule", d.name))
			continue
		}
		var taskID *int64
		if err := m.pool.QueryRow(cctx, `select queues.enqueue_schedule_tick($1, $2, $3, $4, $5)`,
			d.name, d.cron, tick, next, term).Scan(&taskID); err != nil {
			return fmt.Errorf("enqueue tick of schedule %s: %w", d.name, err)
		}
		if tick != nil && taskID != nil {
			m.emit(Event{Kind: EventScheduled, Term: term, Schedule: d.name, Tick: *tick, TaskID: *taskID})
		}
	}
	return nil
}

// parseScheduleCron parses a due schedule's cron expression, logging a bad one once (until it
// changes).
func (m *Maintainer) parseScheduleCron(d dueSchedule) (*Cron, bool) {
	c, err := ParseCron(d.cron)
	m.badCronsMu.Lock()
	defer m.badCronsMu.Unlock()
	if err == nil {
		delete(m.badCrons, d.name)
		return c, true
	}
	if m.badCrons[d.name] != d.cron {
		m.badCrons[d.name] = d.cron
		m.log.Error("maintenance: schedule skipped: its cron expression does not parse; fix it with add_schedule",
			slog.String("schedule", d.name), slog.Any("error", err))
	}
	return nil, false
}
