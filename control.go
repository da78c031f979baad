package taskorch

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Cancel cancels a waiting, pending, running, failed or dead task and returns it. A running task's
// worker loses its lease and is told at commit: it cancels the handler's context within a second
// (cause ErrTaskCancelled), and the handler's outcome is refused (docs/worker.md, "Cancellation"). Cancelling a cancelled task is a
// no-op; a completed task gives ErrWrongState; an unknown id gives ErrNotFound.
//
// A durable workflow's cancel reaches the tasks it spawned (and those they spawned): once the
// workflow's cancel has committed, those not ended are cancelled too, in short transactions that
// never wait for a lock (queues.cancel_spawned_tasks), when the Client's role may execute that
// function. A spawned task whose row stayed busy for about two seconds is left, and the error
// says how many: call Cancel again. docs/workflows.md, "Cancelling a durable workflow".
func (c *Client) Cancel(ctx context.Context, id int64) (*Task, error) {
	t, err := c.control(ctx, c.pool, "cancel", id)
	if err != nil {
		return nil, err
	}
	if err := c.cancelSpawned(ctx, id); err != nil {
		return t, err
	}
	return t, nil
}

// CancelTx is Cancel in the caller's transaction. It cancels the task alone: after the commit,
// cancel the tasks a durable workflow spawned with Cancel (again) or queues.cancel_spawned_tasks.
func (c *Client) CancelTx(ctx context.Context, tx pgx.Tx, id int64) (*Task, error) {
	return c.control(ctx, tx, "cancel", id)
}

// Retry puts a dead, failed or cancelled task back to pending, due now, with its attempts reset
// (its history is kept); a pending task is made due now. A task that names parents waits
// (StatusWaiting) for those that have not ended, and the tasks that its failure cancelled wait
// again (docs/workflows.md, "Retrying a node"). A running, waiting or completed task gives
// ErrWrongState; an unknown id gives ErrNotFound.
func (c *Client) Retry(ctx context.Context, id int64) (*Task, error) {
	return c.control(ctx, c.pool, "retry", id)
}

// RetryTx is Retry in the caller's transaction.
func (c *Client) RetryTx(ctx context.Context, tx pgx.Tx, id int64) (*Task, error) {
	return c.control(ctx, tx, "retry", id)
}

func (c *Client) control(ctx context.Context, db DBTX, op string, id int64) (*Task, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	sql := `select queues.cancel_task($1)`
	if op == "retry" {
		sql = `select queues.retry_task($1)`
	}
	if _, err := db.Exec(ctx, sql, id); err != nil {
		return nil, fmt.Errorf("%s task %d: %w", op, id, mapError(err))
	}
	// A new statement: it sees the change the function made.
	t, err := scanTask(db.QueryRow(ctx, `select `+taskColumns+` from queues.task where task_id = $1`, id))
	if err != nil {
		return nil, fmt.Errorf("%s task %d: %w", op, id, mapError(err))
	}
	return t, nil
}
