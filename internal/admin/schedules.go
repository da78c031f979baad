package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/taskorch/taskorch/internal/maintenance"
)

// ErrInvalidSchedule is wrapped by the errors of AddSchedule for a bad schedule. It is
// maintenance.ErrInvalidSchedule, which the leader's cron parser (maintenance.ParseCron) wraps.
var ErrInvalidSchedule = maintenance.ErrInvalidSchedule

// ErrScheduleNotFound is returned by RemoveSchedule for a name no schedule has.
var ErrScheduleNotFound = errors.New("schedule not found")

// Schedule is a periodic task definition, as ListSchedules returns it.
type Schedule struct {
	Name           string          `json:"name"`
	Cron           string          `json:"cron"`
	TaskType       string          `json:"task_type"`
	Payload        json.RawMessage `json:"payload"`
	Priority       int             `json:"priority"`
	MaxAttempts    int             `json:"max_attempts,omitempty"` // 0: the default (queues.default_max_attempts())
	Enabled        bool            `json:"enabled"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	NextRunAt      *time.Time      `json:"next_run_at"`      // the next tick; nil until the leader computes it
	LastTickAt     *time.Time      `json:"last_tick_at"`     // the tick of the last task enqueued
	LastEnqueuedAt *time.Time      `json:"last_enqueued_at"` // when it was enqueued
	LastTaskID     *int64          `json:"last_task_id"`
}

// ScheduleParams defines a schedule for AddSchedule.
type ScheduleParams struct {
	// Name identifies the schedule: 1 to 128 letters, digits, "_", ".", ":" or "-", starting
	// with a letter or digit. Adding a name that exists replaces its definition.
	Name string
	// Cron is when it fires: see maintenance.Cron.
	Cron string
	// TaskType, Payload (a JSON object; nil means {}), Priority and MaxAttempts (0: the
	// default) are those of each task it enqueues.
	TaskType    string
	Payload     json.RawMessage
	Priority    int
	MaxAttempts int
	// Disabled adds the schedule without running it.
	Disabled bool
}

var scheduleName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)

// AddSchedule adds a schedule, or replaces the definition of the one with the same name. The
// cron expression is parsed first, and a bad one refused with an error wrapping
// ErrInvalidSchedule, as are a bad name, task type or payload. The first tick enqueued is the
// first after now; a replacement keeps its next tick unless the cron expression changed.
// It returns whether the schedule was created (false: replaced).
func AddSchedule(ctx context.Context, db DB, p ScheduleParams) (created bool, err error) {
	return addSchedule(ctx, db, p, time.Now())
}

func addSchedule(ctx context.Context, db DB, p ScheduleParams, now time.Time) (bool, error) {
	if !scheduleName.MatchString(p.Name) || len(p.Name) > 128 {
		return false, fmt.Errorf(`%w: name %q: use 1 to 128 letters, digits, "_", ".", ":" or "-", starting with a letter or digit`,
			ErrInvalidSchedule, p.Name)
	}
	c, err := maintenance.ParseCron(p.Cron)
	if err != nil {
		return false, err
	}
	payload := p.Payload
	if payload == nil {
		payload = json.RawMessage(`{}`)
	}
	var maxAttempts *int
	if p.MaxAttempts != 0 {
		maxAttempts = &p.MaxAttempts
	}
	var created bool
	err = db.QueryRow(ctx, `select queues.add_schedule($1, $2, $3, $4::jsonb, $5, $6, $7, $8)`,
		p.Name, p.Cron, p.TaskType, string(payload), p.Priority, maxAttempts, !p.Disabled, c.Next(now)).Scan(&created)
	if err != nil {
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && (pgErr.Code == "22023" || pgErr.Code == "22P02") {
			return false, fmt.Errorf("%w: %s", ErrInvalidSchedule, pgErr.Message)
		}
		return false, fmt.Errorf("add schedule %s: %w", p.Name, err)
	}
	return created, nil
}

// RemoveSchedule removes the schedule name; tasks it enqueued stay. It returns
// ErrScheduleNotFound when there is no such schedule.
func RemoveSchedule(ctx context.Context, db DB, name string) error {
	var found bool
	if err := db.QueryRow(ctx, `select queues.remove_schedule($1)`, name).Scan(&found); err != nil {
		return fmt.Errorf("remove schedule %s: %w", name, err)
	}
	if !found {
		return fmt.Errorf("%w: %s", ErrScheduleNotFound, name)
	}
	return nil
}

// ListSchedules returns every schedule, by name. It reads queues.schedule: an operator's role
// needs SELECT on it.
func ListSchedules(ctx context.Context, db DB) ([]Schedule, error) {
	rows, err := db.Query(ctx, `
		select name, cron, task_type, payload, priority, coalesce(max_attempts, 0), enabled, created_at, updated_at,
		       next_run_at, last_tick_at, last_enqueued_at, last_task_id
		from queues.schedule
		order by name`)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Schedule, error) {
		var s Schedule
		var payload []byte
		err := r.Scan(&s.Name, &s.Cron, &s.TaskType, &payload, &s.Priority, &s.MaxAttempts, &s.Enabled,
			&s.CreatedAt, &s.UpdatedAt, &s.NextRunAt, &s.LastTickAt, &s.LastEnqueuedAt, &s.LastTaskID)
		s.Payload = payload
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out, nil
}
