package maintenance

import (
	"context"
	"encoding/json"
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
	var declared int64 // the term whose start declared the code's schedules
	every(ctx, m.cfg.ScheduleInterval, func(ctx context.Context) {
		term := m.Term()
		if term == 0 {
			return
		}
		if m.cfg.DeclarePeriodic && declared != term {
			// A failure is retried at the next pass; meanwhile the schedules in the database
			// keep ticking as they are.
			if err := m.declarePeriodic(ctx, term); err != nil {
				m.fail(ctx, "schedule", err)
			} else {
				declared = term
			}
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

// maxCatchUpTicks bounds the ticks of one schedule a pass enqueues (one short transaction
// each); a later pass goes on from where it stopped.
const maxCatchUpTicks = 1000

// enqueueDueTicks enqueues, as the leader of term, the due ticks of every schedule. The catch-up
// policy (Cron.catchUp): when ticks of a schedule were missed (a handover, no leader, a long
// outage), every missed tick within Config.ScheduleCatchUp is enqueued, each once, oldest first;
// older ones are skipped and reported (EventTicksMissed), and when none is that recent the most
// recent one is enqueued. Each tick is one call of queues.enqueue_schedule_tick, which moves
// next_run_at past it, so a leader that stops halfway leaves the rest to the next. A schedule
// just added from SQL without a next_run_at gets the first tick after now, enqueuing nothing.
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
		var ticks []time.Time
		if d.next != nil {
			var skipped int
			var firstSkipped time.Time
			ticks, skipped, firstSkipped = c.catchUp(*d.next, now, m.cfg.ScheduleCatchUp, maxCatchUpTicks)
			if skipped > 0 {
				m.log.Warn("maintenance: schedule ticks skipped: they were older than the catch-up window when the leader found them",
					slog.String("schedule", d.name), slog.Int("skipped", skipped), slog.Time("oldest", firstSkipped),
					slog.Duration("catch_up", m.cfg.ScheduleCatchUp))
				m.emit(Event{Kind: EventTicksMissed, Term: term, Schedule: d.name, Tick: firstSkipped, Missed: skipped})
			}
		}
		if len(ticks) == 0 { // no next_run_at yet, or it was not a tick: start at the first tick after now
			next := c.Next(now)
			if next.IsZero() {
				m.log.Warn("maintenance: schedule has no tick within five years; leaving it", slog.String("schedule", d.name))
				continue
			}
			if _, err := m.pool.Exec(cctx, `select queues.enqueue_schedule_tick($1, $2, null, $3, $4)`,
				d.name, d.cron, next, term); err != nil {
				return fmt.Errorf("enqueue tick of schedule %s: %w", d.name, err)
			}
			continue
		}
		late := 0
		for _, tick := range ticks {
			if m.Term() != term {
				return nil
			}
			next := c.Next(tick)
			if next.IsZero() {
				m.log.Warn("maintenance: schedule has no tick within five years; leaving it", slog.String("schedule", d.name))
				break
			}
			var taskID *int64
			if err := m.pool.QueryRow(cctx, `select queues.enqueue_schedule_tick($1, $2, $3, $4, $5)`,
				d.name, d.cron, tick, next, term).Scan(&taskID); err != nil {
				return fmt.Errorf("enqueue tick of schedule %s: %w", d.name, err)
			}
			if taskID == nil { // the schedule changed, or the term was lost, meanwhile
				break
			}
			isLate := now.Sub(tick) > m.cfg.ScheduleLateAfter
			if isLate {
				late++
			}
			m.emit(Event{Kind: EventScheduled, Term: term, Schedule: d.name, Tick: tick, TaskID: *taskID, Late: isLate})
		}
		if late > 0 {
			m.log.Warn("maintenance: schedule ticks enqueued late (caught up)", slog.String("schedule", d.name),
				slog.Int("ticks", late), slog.Time("oldest", ticks[0]), slog.Duration("late_by", now.Sub(ticks[0])))
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

// Periodic is a schedule declared in code (WorkerConfig.Periodic), as queues.declare_schedules
// takes it.
type Periodic struct {
	Name        string          `json:"name"`
	Cron        string          `json:"cron"`
	TaskType    string          `json:"task_type"`
	Payload     json.RawMessage `json:"payload"`
	Priority    int             `json:"priority"`
	MaxAttempts int             `json:"max_attempts,omitempty"` // 0: the database's default
}

// declarePeriodic makes the schedules declared in code those of Config.Periodic, as the leader
// of term (queues.declare_schedules), and logs what changed. A name taken by a schedule added by
// hand is logged as an error and left alone.
func (m *Maintainer) declarePeriodic(ctx context.Context, term int64) error {
	list := m.cfg.Periodic
	if list == nil {
		list = []Periodic{}
	}
	body, err := json.Marshal(list)
	if err != nil {
		return fmt.Errorf("declare schedules: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout(m.cfg.LeaderTTL))
	defer cancel()
	rows, err := m.pool.Query(cctx, `select schedule_name, action from queues.declare_schedules($1, $2)`, term, body)
	if err != nil {
		return fmt.Errorf("declare schedules: %w", err)
	}
	type change struct{ name, action string }
	changes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (change, error) {
		var c change
		err := r.Scan(&c.name, &c.action)
		return c, err
	})
	if err != nil {
		return fmt.Errorf("declare schedules: %w", err)
	}
	for _, c := range changes {
		switch c.action {
		case "unchanged":
		case "conflict":
			m.log.Error("maintenance: a schedule declared in code has the name of one added by hand; leaving the one in the database",
				slog.String("schedule", c.name))
		default:
			m.log.Info("maintenance: schedule declared in code "+c.action, slog.String("schedule", c.name), slog.Int64("term", term))
		}
	}
	return nil
}
