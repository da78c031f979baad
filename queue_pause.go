package taskorch

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// PausedQueue is a task type whose pending tasks are not being claimed.
type PausedQueue struct {
	TaskType string    `json:"task_type"`
	PausedAt time.Time `json:"paused_at"`
	PausedBy string    `json:"paused_by,omitempty"`
}

// PauseQueue stops workers from claiming pending tasks of taskType. Tasks already running
// finish; enqueueing goes on, so nothing is lost while a queue is paused. It reports whether the
// queue was running (false: it was already paused). by is recorded as who paused it; empty means
// the database user.
func (c *Client) PauseQueue(ctx context.Context, taskType, by string) (bool, error) {
	return c.pauseQueue(ctx, c.pool, taskType, by)
}

// PauseQueueTx is PauseQueue in the caller's transaction: workers stop claiming taskType when
// tx commits, and nothing changes if it rolls back.
func (c *Client) PauseQueueTx(ctx context.Context, tx pgx.Tx, taskType, by string) (bool, error) {
	return c.pauseQueue(ctx, tx, taskType, by)
}

func (c *Client) pauseQueue(ctx context.Context, db DBTX, taskType, by string) (bool, error) {
	if err := c.checkOpen(); err != nil {
		return false, err
	}
	var changed bool
	var byArg any
	if by != "" {
		byArg = by
	}
	if err := db.QueryRow(ctx, `select queues.pause_queue($1, $2)`, taskType, byArg).Scan(&changed); err != nil {
		return false, fmt.Errorf("pause queue %q: %w", taskType, mapError(err))
	}
	return changed, nil
}

// ResumeQueue lets workers claim taskType again and wakes them. It reports whether the queue
// was paused.
func (c *Client) ResumeQueue(ctx context.Context, taskType string) (bool, error) {
	return c.resumeQueue(ctx, c.pool, taskType)
}

// ResumeQueueTx is ResumeQueue in the caller's transaction: the queue resumes, and workers are
// woken, when tx commits.
func (c *Client) ResumeQueueTx(ctx context.Context, tx pgx.Tx, taskType string) (bool, error) {
	return c.resumeQueue(ctx, tx, taskType)
}

func (c *Client) resumeQueue(ctx context.Context, db DBTX, taskType string) (bool, error) {
	if err := c.checkOpen(); err != nil {
		return false, err
	}
	var changed bool
	if err := db.QueryRow(ctx, `select queues.resume_queue($1)`, taskType).Scan(&changed); err != nil {
		return false, fmt.Errorf("resume queue %q: %w", taskType, mapError(err))
	}
	return changed, nil
}

// PausedQueues lists the paused task types, by name.
func (c *Client) PausedQueues(ctx context.Context) ([]PausedQueue, error) {
	return c.pausedQueues(ctx, c.pool)
}

// PausedQueuesTx is PausedQueues in the caller's transaction: it sees the transaction's own
// uncommitted pauses and resumes.
func (c *Client) PausedQueuesTx(ctx context.Context, tx pgx.Tx) ([]PausedQueue, error) {
	return c.pausedQueues(ctx, tx)
}

func (c *Client) pausedQueues(ctx context.Context, db DBTX) ([]PausedQueue, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `select task_type, paused_at, coalesce(paused_by, '') from queues.queue_pause order by task_type`)
	if err != nil {
		return nil, fmt.Errorf("list paused queues: %w", mapError(err))
	}
	defer rows.Close()
	out := []PausedQueue{}
	for rows.Next() {
		var p PausedQueue
		if err := rows.Scan(&p.TaskType, &p.PausedAt, &p.PausedBy); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}
