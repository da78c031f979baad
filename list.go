package taskorch

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch/internal/admin"
)

// Get returns the task with the given id, or ErrNotFound.
func (c *Client) Get(ctx context.Context, id int64) (*Task, error) {
	return c.get(ctx, c.pool, id)
}

// GetTx is Get in the caller's transaction: it sees the transaction's own uncommitted writes
// (a task enqueued with EnqueueTx, cancelled with CancelTx).
func (c *Client) GetTx(ctx context.Context, tx pgx.Tx, id int64) (*Task, error) {
	return c.get(ctx, tx, id)
}

func (c *Client) get(ctx context.Context, db DBTX, id int64) (*Task, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	t, err := scanTaskWithResult(db.QueryRow(ctx, `select `+taskWithResultColumns+` from queues.task where task_id = $1`, id))
	if err != nil {
		return nil, fmt.Errorf("get task %d: %w", id, mapError(err))
	}
	return t, nil
}

// ListParams filters and pages a task listing. The zero value lists the newest tasks.
type ListParams struct {
	// Types keeps tasks of these types; empty means all. A type may be one SQL function's queue,
	// db_function:<schema.function> (as taskorch queues list names it): that function's
	// db_function tasks.
	Types []string
	// Statuses keeps tasks in these states; empty means all.
	Statuses []Status
	// Limit caps the page size. Defaults to 100; at most 10,000.
	Limit int
	// Before continues a listing: only tasks with a smaller id than this (TaskList.Next of the
	// previous page). Zero starts from the newest.
	Before int64
}

// TaskList is one page of a listing, newest first.
type TaskList struct {
	Tasks []*Task
	// Next is the Before of the next page, or 0 when this is the last page.
	Next int64
}

var listSQL = `select ` + taskColumns + `
from queues.task t
where ($1::text[] is null or ` + admin.TypeMatch("$1::text[]") + `)
  and ($2::text[] is null or status = any ($2::text[]::queues.task_status[]))
  and ($3::bigint = 0 or task_id < $3)
order by task_id desc
limit $4`

// List returns a page of tasks, newest first, paged by id (keyset paging: every page costs the
// same however deep it is). p may be nil.
func (c *Client) List(ctx context.Context, p *ListParams) (*TaskList, error) {
	return c.list(ctx, c.pool, p)
}

// ListTx is List in the caller's transaction: it sees the transaction's own uncommitted tasks.
func (c *Client) ListTx(ctx context.Context, tx pgx.Tx, p *ListParams) (*TaskList, error) {
	return c.list(ctx, tx, p)
}

func (c *Client) list(ctx context.Context, db DBTX, p *ListParams) (*TaskList, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	if p == nil {
		p = &ListParams{}
	}
	limit := p.Limit
	switch {
	case limit == 0:
		limit = 100
	case limit < 0 || limit > 10000:
		return nil, inputErrorf("list limit must be between 1 and 10000, got %d", limit)
	}
	var types, statuses []string
	for _, t := range p.Types {
		if err := ValidateTaskType(t); err != nil {
			return nil, err
		}
		types = append(types, t)
	}
	for _, s := range p.Statuses {
		if !s.Valid() {
			return nil, inputErrorf("unknown status %q (want one of %v)", s, Statuses)
		}
		statuses = append(statuses, string(s))
	}
	rows, err := db.Query(ctx, listSQL, types, statuses, p.Before, limit+1)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", mapError(err))
	}
	tasks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Task, error) { return scanTask(r) })
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", mapError(err))
	}
	out := &TaskList{Tasks: tasks}
	if len(tasks) > limit {
		out.Tasks = tasks[:limit]
		out.Next = tasks[limit-1].ID
	}
	return out, nil
}

// Lease is a row of queues.task_lease: one claim of a task. Its ID is the fencing token.
type Lease struct {
	ID        int64     `json:"task_lease_id"`
	TaskID    int64     `json:"task_id"`
	WorkerID  *string   `json:"worker_id,omitempty"`
	Attempt   int       `json:"attempt"`
	LeasedAt  time.Time `json:"leased_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Event is one state change of a task, a row of the queues.task_history view: a claim (Source
// "lease", from the task's task_lease row), a stored queues.task_event row (Source "event"), or
// the completion (Source "task", from the task's own row).
type Event struct {
	ID         *int64    `json:"task_event_id,omitempty"` // the queues.task_event row's id; nil for a claim or a completion
	Source     string    `json:"source"`
	TaskID     int64     `json:"task_id"`
	OccurredAt time.Time `json:"occurred_at"`
	Event      string    `json:"event"`
	FromStatus *Status   `json:"from_status,omitempty"`
	ToStatus   *Status   `json:"to_status,omitempty"`
	LeaseID    *int64    `json:"lease_id,omitempty"`
	WorkerID   *string   `json:"worker_id,omitempty"`
	Attempt    *int      `json:"attempt,omitempty"`
	Detail     *string   `json:"detail,omitempty"`
	// Actor is who did it, for an operator's action (retried, cancelled, deleted by hand): the
	// dashboard's signed-in name or the CLI's --actor, else the database role (the
	// queues.task_event row's actor column); nil for what workers and the leader do.
	Actor *string `json:"actor,omitempty"`
}

// ErrorRecord is a row of queues.error: a failure or a refusal, with its context.
type ErrorRecord struct {
	ID         int64          `json:"error_id"`
	TaskID     *int64         `json:"task_id,omitempty"`
	OccurredAt time.Time      `json:"occurred_at"`
	Message    string         `json:"error_message"`
	Context    map[string]any `json:"context"`
}

// WorkflowStep is a durable workflow's checkpoint, a row of queues.workflow_step: a durable call
// its code completed (docs/workflows.md, "Durable workflows in Go").
type WorkflowStep struct {
	Position int             `json:"position"` // its place in the run: 1, 2, 3, ...
	Kind     string          `json:"kind"`     // step, step_tx, sleep, version, signal_wait, signal
	Name     string          `json:"name"`
	Result   json.RawMessage `json:"result,omitempty"`
	// WakeAt is a sleep's end, or a signal wait's deadline.
	WakeAt      *time.Time `json:"wake_at,omitempty"`
	Attempt     int        `json:"attempt"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	CompletedAt time.Time  `json:"completed_at"`
}

// History is everything recorded about one task, oldest first. Events include the claims and
// the completion (see Event); Leases and Errors are the task's queues.task_lease and
// queues.error rows; Steps, a durable workflow's checkpoints (nil for other tasks, and when the
// client's role may not select queues.workflow_step).
type History struct {
	Leases []Lease        `json:"leases"`
	Events []Event        `json:"events"`
	Errors []ErrorRecord  `json:"errors"`
	Steps  []WorkflowStep `json:"steps,omitempty"`
}

// History returns a task's leases, events and errors. An unknown id gives ErrNotFound.
func (c *Client) History(ctx context.Context, id int64) (*History, error) {
	return c.history(ctx, c.pool, id)
}

// HistoryTx is History in the caller's transaction: it sees the transaction's own uncommitted
// writes. In a REPEATABLE READ transaction, GetTx and HistoryTx read one snapshot.
func (c *Client) HistoryTx(ctx context.Context, tx pgx.Tx, id int64) (*History, error) {
	return c.history(ctx, tx, id)
}

func (c *Client) history(ctx context.Context, db DBTX, id int64) (*History, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	var exists bool
	if err := db.QueryRow(ctx, `select exists (select from queues.task where task_id = $1)`, id).Scan(&exists); err != nil {
		return nil, fmt.Errorf("history of task %d: %w", id, err)
	}
	if !exists {
		return nil, fmt.Errorf("history of task %d: %w", id, ErrNotFound)
	}
	h := &History{}
	rows, err := db.Query(ctx, `select task_lease_id, task_id, worker_id, attempt, leased_at, expires_at
		from queues.task_lease where task_id = $1 order by task_lease_id`, id)
	if err == nil {
		h.Leases, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Lease])
	}
	if err != nil {
		return nil, fmt.Errorf("history of task %d: leases: %w", id, err)
	}
	rows, err = db.Query(ctx, `select case when h.source = 'event' then h.source_id end, h.source, h.task_id, h.occurred_at, h.event,
		h.from_status::text, h.to_status::text, h.lease_id, h.worker_id, h.attempt, h.detail,
		(select e.actor from queues.task_event e
		 where h.source = 'event' and e.task_id = h.task_id and e.task_event_id = h.source_id and e.occurred_at = h.occurred_at)
		from queues.task_history h where h.task_id = $1 and h.source <> 'error' order by h.occurred_at, h.step, h.source_id`, id)
	if err == nil {
		h.Events, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Event])
	}
	if err != nil {
		return nil, fmt.Errorf("history of task %d: events: %w", id, err)
	}
	rows, err = db.Query(ctx, `select error_id, task_id, occurred_at, error_message, context
		from queues.error where task_id = $1 order by error_id`, id)
	if err == nil {
		h.Errors, err = pgx.CollectRows(rows, pgx.RowToStructByPos[ErrorRecord])
	}
	if err != nil {
		return nil, fmt.Errorf("history of task %d: errors: %w", id, err)
	}
	var mayRead bool
	if err := db.QueryRow(ctx, `select has_table_privilege('queues.workflow_step', 'select')`).Scan(&mayRead); err != nil {
		return nil, fmt.Errorf("history of task %d: steps: %w", id, err)
	}
	if mayRead {
		rows, err = db.Query(ctx, `select seq, kind, name, result, wake_at, attempt, started_at, completed_at
			from queues.workflow_step where task_id = $1 order by seq`, id)
		if err == nil {
			h.Steps, err = pgx.CollectRows(rows, pgx.RowToStructByPos[WorkflowStep])
		}
		if err != nil {
			return nil, fmt.Errorf("history of task %d: steps: %w", id, err)
		}
		if len(h.Steps) == 0 {
			h.Steps = nil
		}
	}
	return h, nil
}
