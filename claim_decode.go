package taskorch

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// A claim commits its leases before the worker reads its rows. A row the worker cannot read (a
// time PostgreSQL holds and Go cannot, such as -infinity, which the table's constraints refuse
// but a database of another version or a hand-written UPDATE might hold) must not take the rest
// of the claim with it: collectClaimed reads every row with types that cannot fail, fails the
// unreadable tasks on their own, without retry, and returns the others to run.

// claimedRow is a claimed task as read, before it is checked.
type claimedRow struct {
	task                                                                  Task
	scheduledAt, enqueuedAt, runAt                                        pgtype.Timestamptz
	leaseExpiresAt, claimedAt, completedAt, failedAt, deadAt, cancelledAt pgtype.Timestamptz
}

func (c *claimedRow) dest() []any {
	t := &c.task
	return []any{&t.ID, &t.Type, (*[]byte)(&t.Payload), &t.Priority, &t.IdempotencyKey, &c.scheduledAt, &c.enqueuedAt,
		&t.MaxAttempts, &t.Status, &c.runAt, &t.Attempt, &t.LeaseID, &c.leaseExpiresAt, &t.WorkerID, &t.LastError,
		&t.CallFailure, &c.claimedAt, &c.completedAt, &c.failedAt, &c.deadAt, &c.cancelledAt}
}

// check completes c.task from the row's times, or says why the task cannot be run.
func (c *claimedRow) check() error {
	t := &c.task
	if t.LeaseID == nil {
		return fmt.Errorf("the claimed row of task %d has no lease", t.ID)
	}
	var err error
	need := func(name string, v pgtype.Timestamptz, dst *time.Time) {
		if err != nil {
			return
		}
		if !v.Valid || v.InfinityModifier != pgtype.Finite {
			err = fmt.Errorf("the task's %s is %s, which the worker cannot read", name, timestamptzText(v))
			return
		}
		*dst = v.Time
	}
	maybe := func(name string, v pgtype.Timestamptz, dst **time.Time) {
		if err != nil || !v.Valid {
			return
		}
		if v.InfinityModifier != pgtype.Finite {
			err = fmt.Errorf("the task's %s is %s, which the worker cannot read", name, timestamptzText(v))
			return
		}
		tm := v.Time
		*dst = &tm
	}
	need("scheduled_at", c.scheduledAt, &t.ScheduledAt)
	need("enqueued_at", c.enqueuedAt, &t.EnqueuedAt)
	need("run_at", c.runAt, &t.RunAt)
	maybe("lease_expires_at", c.leaseExpiresAt, &t.LeaseExpiresAt)
	maybe("claimed_at", c.claimedAt, &t.ClaimedAt)
	maybe("completed_at", c.completedAt, &t.CompletedAt)
	maybe("failed_at", c.failedAt, &t.FailedAt)
	maybe("dead_at", c.deadAt, &t.DeadAt)
	maybe("cancelled_at", c.cancelledAt, &t.CancelledAt)
	return err
}

func timestamptzText(v pgtype.Timestamptz) string {
	switch {
	case !v.Valid:
		return "NULL"
	case v.InfinityModifier == pgtype.Infinity:
		return "infinity"
	case v.InfinityModifier == pgtype.NegativeInfinity:
		return "-infinity"
	}
	return v.Time.String()
}

// collectClaimed reads the rows of a claim (taskColumns) and returns the tasks to run. A task
// whose row cannot be read is failed without retry, with the reason, and left out; the error is
// that of the query itself (the claim failed as a whole).
func (w *Worker) collectClaimed(ctx context.Context, rows pgx.Rows) ([]*Task, error) {
	var tasks []*Task
	var bad []*Task
	var reasons []string
	var c claimedRow
	_, err := pgx.ForEachRow(rows, c.dest(), func() error {
		err := c.check()
		t := c.task // copied: c is reused for the next row
		if err != nil {
			bad, reasons = append(bad, &t), append(reasons, err.Error())
			return nil
		}
		tasks = append(tasks, &t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, t := range bad {
		w.failUnreadable(ctx, t, reasons[i])
	}
	return tasks, nil
}

// failUnreadable fails a claimed task the worker cannot read, for good: running it again cannot
// help. The claim's other tasks are not held up by it.
func (w *Worker) failUnreadable(ctx context.Context, t *Task, reason string) {
	msg := fmt.Sprintf("the worker could not read the claimed task: %s; failed without retry (docs/guarantees.md)", reason)
	w.log.Error("claimed a task it cannot read; failing it alone", "task_id", t.ID, "task_type", t.Type, "reason", reason)
	if t.LeaseID == nil {
		return // no lease to fail it under: it returns to pending when its lease expires
	}
	octx, cancel := outcomeContext(ctx)
	defer cancel()
	err := w.retryDB(octx, "fail unreadable task", func(ctx context.Context) error {
		_, err := w.pool.Exec(ctx, `select queues.fail_task($1, $2, $3, false, $4)`, t.ID, msg, *t.LeaseID,
			map[string]any{"reason": "unreadable_task"})
		return err
	})
	if err != nil {
		w.log.Error("could not fail the unreadable task; its lease will expire", "task_id", t.ID, "error", err)
	}
}
