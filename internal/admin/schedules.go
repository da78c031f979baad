package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
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
	DeclaredInCode bool            `json:"declared_in_code"` // kept by a worker's WorkerConfig.Periodic
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
		       next_run_at, last_tick_at, last_enqueued_at, last_task_id, declared_in_code
		from queues.schedule
		order by name`)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Schedule, error) {
		var s Schedule
		var payload []byte
		err := r.Scan(&s.Name, &s.Cron, &s.TaskType, &payload, &s.Priority, &s.MaxAttempts, &s.Enabled,
			&s.CreatedAt, &s.UpdatedAt, &s.NextRunAt, &s.LastTickAt, &s.LastEnqueuedAt, &s.LastTaskID, &s.DeclaredInCode)
		s.Payload = payload
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out, nil
}

// scheduleCron reads a schedule's cron expression, parsed with the leader's parser, and the
// anchor of its ticks (its next_run_at, else its last tick; zero when it has neither).
func scheduleCron(ctx context.Context, db DB, name string) (*maintenance.Cron, time.Time, error) {
	if !scheduleName.MatchString(name) || len(name) > 128 {
		return nil, time.Time{}, fmt.Errorf("%w: %q is not a schedule name", ErrInvalidInput, name)
	}
	var expr string
	var anchor *time.Time
	err := db.QueryRow(ctx, `select cron, coalesce(next_run_at, last_tick_at) from queues.schedule where name = $1`, name).Scan(&expr, &anchor)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, time.Time{}, fmt.Errorf("%w: schedule %q does not exist", ErrScheduleNotFound, name)
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read schedule %s: %w", name, err)
	}
	c, err := maintenance.ParseCron(expr)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("schedule %s: %w", name, err)
	}
	if anchor == nil {
		return c, time.Time{}, nil
	}
	return c, *anchor, nil
}

// PauseSchedule stops the schedule's ticks (queues.pause_schedule), recording actor (empty: the
// database role). It reports whether it was running; ErrScheduleNotFound when there is none.
func PauseSchedule(ctx context.Context, db DB, name, actor string) (bool, error) {
	var changed bool
	if err := db.QueryRow(ctx, `select queues.pause_schedule($1, $2)`, name, nullIfEmpty(actor)).Scan(&changed); err != nil {
		return false, actionError("pause schedule "+name, err)
	}
	return changed, nil
}

// ResumeSchedule lets a paused schedule tick again from its first tick after now (what it
// missed while paused is not replayed), recording actor (queues.resume_schedule). It reports
// whether it was paused.
func ResumeSchedule(ctx context.Context, db DB, name, actor string) (bool, error) {
	return resumeSchedule(ctx, db, name, actor, time.Now())
}

func resumeSchedule(ctx context.Context, db DB, name, actor string, now time.Time) (bool, error) {
	c, _, err := scheduleCron(ctx, db, name)
	if err != nil {
		return false, err
	}
	var changed bool
	if err := db.QueryRow(ctx, `select queues.resume_schedule($1, $2, $3)`, name, c.Next(now), nullIfEmpty(actor)).Scan(&changed); err != nil {
		return false, actionError("resume schedule "+name, err)
	}
	return changed, nil
}

// RunScheduleNow enqueues one task of the schedule now, outside its ticks: the schedule's next
// tick does not move (queues.run_schedule_now). It records actor and returns the task's id.
func RunScheduleNow(ctx context.Context, db DB, name, actor string) (int64, error) {
	var id int64
	if err := db.QueryRow(ctx, `select queues.run_schedule_now($1, $2)`, name, nullIfEmpty(actor)).Scan(&id); err != nil {
		return 0, actionError("run schedule "+name, err)
	}
	return id, nil
}

// MaxBackfillTicks bounds the ticks one backfill enqueues.
const MaxBackfillTicks = 10_000

// backfillBatch is how many ticks one call of queues.backfill_schedule takes.
const backfillBatch = 500

// Backfill is what BackfillSchedule did.
type Backfill struct {
	Schedule string      `json:"schedule"`
	From     time.Time   `json:"from"`
	To       time.Time   `json:"to"`
	Ticks    []time.Time `json:"ticks"`    // every tick of the window, oldest first
	Enqueued int         `json:"enqueued"` // tasks enqueued
	Existing int         `json:"existing"` // ticks whose task was there already
	DryRun   bool        `json:"dry_run,omitempty"`
}

// BackfillSchedule enqueues the ticks the schedule should have had from from to to (both
// included), each once: a tick whose task exists (the leader enqueued it, or an earlier
// backfill did, and retention has not pruned it) is not enqueued again. The ticks are computed
// with the leader's parser, from the schedule's cron expression now (an @every schedule's
// anchored at its next tick, as the leader's are); to may not be in the
// future (the leader enqueues those) and the window may hold at most MaxBackfillTicks ticks.
// dryRun computes the ticks and enqueues nothing. It records actor (queues.backfill_schedule,
// up to 500 ticks a statement).
func BackfillSchedule(ctx context.Context, db DB, name string, from, to time.Time, actor string, dryRun bool) (*Backfill, error) {
	return backfillSchedule(ctx, db, name, from, to, actor, dryRun, time.Now())
}

func backfillSchedule(ctx context.Context, db DB, name string, from, to time.Time, actor string, dryRun bool, now time.Time) (*Backfill, error) {
	from, to = from.UTC(), to.UTC()
	switch {
	case from.IsZero() || to.IsZero():
		return nil, fmt.Errorf("%w: a backfill needs a window: from and to", ErrInvalidInput)
	case to.Before(from):
		return nil, fmt.Errorf("%w: the window ends (%s) before it starts (%s)", ErrInvalidInput, to.Format(time.RFC3339), from.Format(time.RFC3339))
	case to.After(now):
		return nil, fmt.Errorf("%w: the window ends in the future (%s): the leader enqueues the ticks to come", ErrInvalidInput, to.Format(time.RFC3339))
	}
	c, anchor, err := scheduleCron(ctx, db, name)
	if err != nil {
		return nil, err
	}
	b := &Backfill{Schedule: name, From: from, To: to, DryRun: dryRun}
	var ok bool
	if b.Ticks, ok = c.Between(from, to, anchor, MaxBackfillTicks); !ok {
		return nil, fmt.Errorf("%w: the window holds more than %d ticks of %s; backfill a shorter one", ErrInvalidInput, MaxBackfillTicks, c)
	}
	if dryRun || len(b.Ticks) == 0 {
		return b, nil
	}
	for chunk := range slices.Chunk(b.Ticks, backfillBatch) {
		var enq, existing int
		if err := db.QueryRow(ctx, `select enqueued, existing from queues.backfill_schedule($1, $2, $3)`,
			name, chunk, nullIfEmpty(actor)).Scan(&enq, &existing); err != nil {
			return b, actionError("backfill schedule "+name, err)
		}
		b.Enqueued += enq
		b.Existing += existing
	}
	return b, nil
}

// ScheduleEvent is an operator's action on a schedule, a row of queues.schedule_event.
type ScheduleEvent struct {
	ID         int64           `json:"schedule_event_id"`
	Name       string          `json:"name"`
	OccurredAt time.Time       `json:"occurred_at"`
	Event      string          `json:"event"` // paused, resumed, run_now, backfilled
	Actor      string          `json:"actor"`
	Detail     json.RawMessage `json:"detail"`
}

// ScheduleEvents returns the latest operators' actions on schedules (name empty: all), newest
// first, at most limit. It reads queues.schedule_event: an operator's role needs SELECT on it.
func ScheduleEvents(ctx context.Context, db DB, name string, limit int) ([]ScheduleEvent, error) {
	rows, err := db.Query(ctx, `select schedule_event_id, name, occurred_at, event, actor, detail
		from queues.schedule_event where ($1 = '' or name = $1)
		order by schedule_event_id desc limit $2`, name, limit)
	if err != nil {
		return nil, fmt.Errorf("schedule events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ScheduleEvent, error) {
		var e ScheduleEvent
		var detail []byte
		err := r.Scan(&e.ID, &e.Name, &e.OccurredAt, &e.Event, &e.Actor, &detail)
		e.Detail = detail
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("schedule events: %w", err)
	}
	return out, nil
}
