package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrWorkflowNotFound is returned by CancelWorkflow for an id that is no workflow's.
var ErrWorkflowNotFound = errors.New("workflow not found")

// WorkflowCancel is what CancelWorkflow did.
type WorkflowCancel struct {
	WorkflowID int64 `json:"workflow_id"`
	// Cancelled counts the tasks this call cancelled (waiting, pending, running, failed or dead
	// before). Tasks that had ended already are left as they are.
	Cancelled int64 `json:"cancelled"`
	// Skipped counts the tasks still not ended whose row another transaction held through every
	// round (a completion or a lease renewal in flight): run the cancel again.
	Skipped int64 `json:"skipped"`
	Rounds  int   `json:"rounds"`
}

// CancelWorkflow cancels every task of workflow id that has not ended (queues.cancel_workflow):
// waiting, pending, running (its worker is told at commit), failed and dead tasks, recording
// actor (empty: the database role) and reason (empty: "workflow N cancelled") in each task's
// cancelled event. Each round is one short transaction that never waits for a lock; tasks whose
// row another transaction held are tried again a few times over about two seconds, as
// ActOnTaskIDs does, then counted in Skipped. ErrWorkflowNotFound for an id that is no
// workflow's, ErrInvalidInput for an id that is not positive.
func CancelWorkflow(ctx context.Context, db DB, id int64, actor, reason string) (WorkflowCancel, error) {
	res := WorkflowCancel{WorkflowID: id}
	pause := 20 * time.Millisecond
	for {
		var matched, done, skipped int64
		err := db.QueryRow(ctx, `select matched, done, skipped from queues.cancel_workflow($1, $2, $3)`,
			id, nullIfEmpty(actor), nullIfEmpty(reason)).Scan(&matched, &done, &skipped)
		if err != nil {
			if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "P0002" {
				return res, fmt.Errorf("%w: %s", ErrWorkflowNotFound, pgErr.Message)
			}
			return res, actionError("cancel workflow", err)
		}
		res.Rounds++
		res.Cancelled += done
		res.Skipped = skipped
		if skipped == 0 || res.Rounds == 9 {
			return res, nil
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 400*time.Millisecond)
	}
}
