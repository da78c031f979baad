package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrTaskNotFound is returned by CancelSpawned for an id no task has.
var ErrTaskNotFound = errors.New("task not found")

// SpawnedCancel is what CancelSpawned did.
type SpawnedCancel struct {
	TaskID int64 `json:"task_id"`
	// Cancelled counts the spawned tasks this call cancelled (waiting, pending, running, failed
	// or dead before); those that had ended are left as they are.
	Cancelled int64 `json:"cancelled"`
	// Skipped counts the spawned tasks still not ended whose row another transaction held
	// through every round (a completion, a claim or a lease renewal in flight): call again.
	Skipped int64 `json:"skipped"`
	Rounds  int   `json:"rounds"`
}

// CancelSpawned cancels the tasks durable workflow task id spawned, and those they spawned
// (queues.cancel_spawned_tasks), that have not ended, recording actor (empty: the database role)
// and reason (empty: "spawned by workflow task N, cancelled"). Each round is one short
// transaction that never locks the workflow's row nor waits for a spawned one's; rows another
// transaction held are tried again a few times over about two seconds, as CancelWorkflow does,
// then counted in Skipped. ErrTaskNotFound for an id no task has, ErrInvalidInput for one that
// is not positive. docs/workflows.md, "Cancelling a durable workflow".
func CancelSpawned(ctx context.Context, db DB, id int64, actor, reason string) (SpawnedCancel, error) {
	res := SpawnedCancel{TaskID: id}
	pause := 20 * time.Millisecond
	for {
		var matched, done, skipped int64
		err := db.QueryRow(ctx, `select matched, done, skipped from queues.cancel_spawned_tasks($1, $2, $3)`,
			id, nullIfEmpty(actor), nullIfEmpty(reason)).Scan(&matched, &done, &skipped)
		if err != nil {
			if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "P0002" {
				return res, fmt.Errorf("%w: %s", ErrTaskNotFound, pgErr.Message)
			}
			return res, actionError("cancel spawned tasks", err)
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
