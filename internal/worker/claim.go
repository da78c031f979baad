package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/taskorch/taskorch/internal/taskrow"
	"github.com/taskorch/taskorch/tasktype"
)

// The one claim path: every task this worker runs is claimed here, by one of four statements,
// and read by collectClaimed. The fetch loop (fetch.go) decides when, how many and from which
// source; the claimed tasks go to the claim-ahead buffer, from which the starter starts them.

// claimKind is which claim statement a source uses.
type claimKind uint8

const (
	// claimDue: the due tasks, in priority order (queues.claim_tasks).
	claimDue claimKind = iota
	// claimLimited: due tasks of limited types only (queues.claim_limited_tasks): a worker on a
	// transport claims these from the database, as they are not sent as messages
	// (docs/limits.md).
	claimLimited
	// claimAtToken: as claimLimited, after waiting in the database, up to tokenWaitMax, for the
	// next token of a rate limit (queues.claim_limited_tasks_at_token; docs/limits.md).
	claimAtToken
	// claimByID: the tasks a transport delivered, by id (queues.claim_tasks_by_id): exactly one
	// claim of a task wins.
	claimByID
)

var claimSQL = [...]string{
	claimDue:     `select ` + taskrow.Columns + ` from queues.claim_tasks($1, $2, $3::interval, $4)`,
	claimLimited: `select ` + taskrow.Columns + ` from queues.claim_limited_tasks($1, $2, $3::interval, $4)`,
	claimByID:    `select ` + taskrow.Columns + ` from queues.claim_tasks_by_id($1, $2, $3::interval, $4)`,
	claimAtToken: `select ` + taskrow.Columns + ` from queues.claim_limited_tasks_at_token($1, $2, $3::interval, $4, ` +
		`interval '` + tokenWaitMaxSQL + `')`,
}

// claim claims up to n tasks (claimByID: the tasks of ids) for this worker, of the types it
// claims, and returns those it can run. ctx must not be the one whose end stops the worker (see
// fetch.go); the claim is bounded by claimTimeout instead.
func (w *Worker) claim(ctx context.Context, kind claimKind, n int, ids []int64) ([]*tasktype.Task, error) {
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	var which any = n
	if kind == claimByID {
		which = ids
	}
	rows, err := w.pool.Query(ctx, claimSQL[kind], w.cfg.ID, which, w.lease, w.types)
	if err != nil {
		return nil, err
	}
	return w.collectClaimed(ctx, rows)
}

// claimAnnounced calls queues.worker_waiting (listen.go) and then claims up to n tasks, in one
// round trip (a batch: the claim's snapshot is taken after the announcement). clear is
// worker_waiting's answer: false when an enqueue was in flight whose task may commit after the
// claim without a notification. ctx as for claim.
func (w *Worker) claimAnnounced(ctx context.Context, kind claimKind, n int) (tasks []*tasktype.Task, clear bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	b := &pgx.Batch{}
	b.Queue(workerWaitingSQL)
	b.Queue(claimSQL[kind], w.cfg.ID, n, w.lease, w.types)
	br := w.pool.SendBatch(ctx, b)
	defer func() { err = errors.Join(err, br.Close()) }()
	if err := br.QueryRow().Scan(&clear); err != nil {
		return nil, false, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, false, err
	}
	tasks, err = w.collectClaimed(ctx, rows)
	return tasks, clear, err
}

// A claim commits its leases before the worker reads its rows. A row the worker cannot read (a
// time PostgreSQL holds and Go cannot, such as -infinity, which the table's constraints refuse
// but a database of another version or a hand-written UPDATE might hold) must not take the rest
// of the claim with it: collectClaimed reads every row with types that cannot fail, fails the
// unreadable tasks on their own, without retry, and returns the others to run.

// claimedRow is a claimed task as read, before it is checked.
type claimedRow struct {
	task                                                                  tasktype.Task
	scheduledAt, enqueuedAt, runAt                                        pgtype.Timestamptz
	leaseExpiresAt, claimedAt, completedAt, failedAt, deadAt, cancelledAt pgtype.Timestamptz
}

// dest is the scan destinations of taskrow.Columns, the times read as pgtype.Timestamptz.
func (c *claimedRow) dest() []any {
	t := &c.task
	return []any{&t.ID, &t.Type, (*[]byte)(&t.Payload), &t.Priority, &t.IdempotencyKey, &c.scheduledAt, &c.enqueuedAt,
		&t.MaxAttempts, &t.Status, &c.runAt, &t.Attempt, &t.LeaseID, &c.leaseExpiresAt, &t.WorkerID, &t.LastError,
		&t.CallFailure, &c.claimedAt, &c.completedAt, &c.failedAt, &c.deadAt, &c.cancelledAt, &t.ParentIDs, &t.WorkflowID}
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

// collectClaimed reads the rows of a claim (taskrow.Columns) and returns the tasks to run. A task
// whose row cannot be read is failed without retry, with the reason, and left out; the error is
// that of the query itself (the claim failed as a whole).
func (w *Worker) collectClaimed(ctx context.Context, rows pgx.Rows) ([]*tasktype.Task, error) {
	var tasks []*tasktype.Task
	var bad []*tasktype.Task
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

// ClaimOne claims task id on db for workerID, under a lease of lease, as a delivered task is
// claimed (queues.claim_tasks_by_id), and returns it; an error when it cannot be claimed (it is
// not pending and due, its queue is paused, its limit is full) or its row cannot be read.
func ClaimOne(ctx context.Context, db Querier, workerID string, id int64, lease time.Duration) (*tasktype.Task, error) {
	rows, err := db.Query(ctx, claimSQL[claimByID], workerID, []int64{id}, lease.String(), nil)
	if err != nil {
		return nil, err
	}
	var c claimedRow
	var t *tasktype.Task
	var bad error
	if _, err := pgx.ForEachRow(rows, c.dest(), func() error {
		bad = c.check()
		t = &c.task
		return nil
	}); err != nil {
		return nil, err
	}
	switch {
	case bad != nil:
		return nil, bad
	case t == nil:
		return nil, fmt.Errorf("task %d cannot be claimed: it does not exist, or is not pending and due (run_at passed), "+
			"or its queue is paused, or its limit is full", id)
	}
	return t, nil
}
