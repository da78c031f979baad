package taskorch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch/internal/admin"
)

// Schedule is a periodic task, a row of queues.schedule: at every tick of Cron the leader (one
// worker of the fleet) enqueues one task of TaskType with Payload, under the idempotency key
// schedule:<name>:<tick in UTC, RFC 3339>, so a tick is enqueued once however many workers run.
type Schedule struct {
	Name        string          `json:"name"`
	Cron        string          `json:"cron"`
	TaskType    string          `json:"task_type"`
	Payload     json.RawMessage `json:"payload"`
	Priority    int             `json:"priority"`
	MaxAttempts int             `json:"max_attempts,omitempty"` // 0: the database's default (25)
	Enabled     bool            `json:"enabled"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	// NextRunAt is the next tick to enqueue; nil until the leader computes it.
	NextRunAt *time.Time `json:"next_run_at"`
	// LastTickAt is the tick of the last task enqueued, LastEnqueuedAt when it was enqueued and
	// LastTaskID its id; nil before the first.
	LastTickAt     *time.Time `json:"last_tick_at"`
	LastEnqueuedAt *time.Time `json:"last_enqueued_at"`
	LastTaskID     *int64     `json:"last_task_id"`
	// DeclaredInCode is true for a schedule a worker's code declares (WorkerConfig.Periodic):
	// the leader keeps it as the code says, and removes it when the code no longer declares it.
	DeclaredInCode bool `json:"declared_in_code"`
}

// ScheduleParams defines a schedule for AddSchedule.
type ScheduleParams struct {
	// Name identifies the schedule: 1 to 128 letters, digits, "_", ".", ":" or "-", starting
	// with a letter or digit. Adding a name that exists replaces that schedule's definition.
	Name string

	// Cron is when it fires, in UTC unless prefixed with CRON_TZ=<zone>: 5 fields (minute hour
	// day-of-month month day-of-week, e.g. "*/15 * * * *") or a descriptor (@yearly, @monthly,
	// @weekly, @daily, @hourly, @every <duration>). It is parsed here with the parser the leader
	// uses; an expression it refuses, or one that never fires, is ErrInvalidInput.
	Cron string

	// Args is the payload of every task the schedule enqueues, and its TaskType their type, as
	// for Enqueue (RawArgs for a ready-made JSON object). Of the args' default options
	// (TaskArgsWithOpts) only Priority and MaxAttempts apply: each tick is scheduled at its own
	// time, under its own idempotency key.
	Args TaskArgs

	// Priority of the tasks: nil means the args' default (TaskArgsWithOpts), else 0; new(0) is
	// an explicit 0, as in EnqueueOpts.
	Priority *int

	// MaxAttempts of the tasks: 0 means the args' default, else the database's (25).
	MaxAttempts int

	// Disabled adds the schedule without running it.
	Disabled bool
}

// AddSchedule adds a periodic schedule, or replaces the definition of the one with the same
// name, and reports whether it was created (false: replaced). The first tick enqueued is the
// first after now; a replacement keeps its next tick unless its Cron changed or it is being
// enabled again. A bad name, cron expression, type or payload is ErrInvalidInput, and nothing is
// written. The leader enqueues the ticks; a schedule does nothing while no worker runs.
func (c *Client) AddSchedule(ctx context.Context, p *ScheduleParams) (created bool, err error) {
	return c.addSchedule(ctx, c.pool, p)
}

// AddScheduleTx is AddSchedule in the caller's transaction: the schedule exists, and the leader
// sees it, only if tx commits.
func (c *Client) AddScheduleTx(ctx context.Context, tx pgx.Tx, p *ScheduleParams) (created bool, err error) {
	return c.addSchedule(ctx, tx, p)
}

func (c *Client) addSchedule(ctx context.Context, db DBTX, p *ScheduleParams) (bool, error) {
	if err := c.checkOpen(); err != nil {
		return false, err
	}
	if p == nil {
		return false, inputErrorf("AddSchedule needs a *ScheduleParams")
	}
	// The task's type, payload, priority and max attempts, as Enqueue would make them.
	row, err := c.prepare(p.Args, &EnqueueOpts{Priority: p.Priority, MaxAttempts: p.MaxAttempts}, "")
	if err != nil {
		return false, fmt.Errorf("schedule %q: %w", p.Name, err)
	}
	mp := admin.ScheduleParams{
		Name:     p.Name,
		Cron:     p.Cron,
		TaskType: row.taskType,
		Payload:  json.RawMessage(row.payload),
		Priority: int(row.priority),
		Disabled: p.Disabled,
	}
	if row.maxAttempts != nil {
		mp.MaxAttempts = int(*row.maxAttempts)
	}
	created, err := admin.AddSchedule(ctx, db, mp)
	if errors.Is(err, admin.ErrInvalidSchedule) {
		return false, &InputError{Msg: err.Error()} // "invalid schedule: cron ...: what is wrong"
	}
	if err != nil {
		return false, mapError(err)
	}
	return created, nil
}

// RemoveSchedule removes the schedule name; the tasks it enqueued stay. A name no schedule has
// is ErrNotFound.
func (c *Client) RemoveSchedule(ctx context.Context, name string) error {
	return c.removeSchedule(ctx, c.pool, name)
}

// RemoveScheduleTx is RemoveSchedule in the caller's transaction.
func (c *Client) RemoveScheduleTx(ctx context.Context, tx pgx.Tx, name string) error {
	return c.removeSchedule(ctx, tx, name)
}

func (c *Client) removeSchedule(ctx context.Context, db DBTX, name string) error {
	if err := c.checkOpen(); err != nil {
		return err
	}
	err := admin.RemoveSchedule(ctx, db, name)
	if errors.Is(err, admin.ErrScheduleNotFound) {
		return &notFoundError{msg: fmt.Sprintf("schedule %q does not exist", name)}
	}
	return mapError(err)
}

// Schedules lists the schedules, by name. It reads queues.schedule: an operator's role needs
// SELECT on it (docs/security.md).
func (c *Client) Schedules(ctx context.Context) ([]Schedule, error) {
	return c.schedules(ctx, c.pool)
}

// SchedulesTx is Schedules in the caller's transaction: it sees the transaction's own
// uncommitted schedules.
func (c *Client) SchedulesTx(ctx context.Context, tx pgx.Tx) ([]Schedule, error) {
	return c.schedules(ctx, tx)
}

func (c *Client) schedules(ctx context.Context, db DBTX) ([]Schedule, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	ss, err := admin.ListSchedules(ctx, db)
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]Schedule, len(ss))
	for i, s := range ss {
		out[i] = Schedule(s)
	}
	return out, nil
}
