package dashboard

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch/internal/admin"
)

// leaderRow is the leader lease.
type leaderRow struct {
	WorkerID  *string
	Term      int64
	ElectedAt time.Time
	ExpiresAt time.Time
	Valid     bool // unexpired
}

// runningTask is a task running under a worker's lease.
type runningTask struct {
	ID             int64
	Type           string
	WorkerID       *string
	Attempt        int
	MaxAttempts    int
	ClaimedAt      *time.Time
	LeaseExpiresAt *time.Time
}

type workersData struct {
	Workers  []admin.Worker
	Leader   *leaderRow
	Running  []runningTask
	Capacity int // the pool sizes added up
	Busy     int
}

// maxRunningShown bounds the running tasks the workers page lists.
const maxRunningShown = 500

func (h *Handler) workersPage(w http.ResponseWriter, r *http.Request) {
	var d workersData
	err := h.readTx(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
		var err error
		if d.Workers, err = admin.ListWorkers(ctx, tx); err != nil {
			return err
		}
		for _, wk := range d.Workers {
			d.Capacity += wk.PoolSize
			d.Busy += wk.RunningTasks
		}
		var l leaderRow
		err = tx.QueryRow(ctx, `select worker_id, term, elected_at, expires_at, expires_at > now()
			from queues.leader where name = 'default'`).Scan(&l.WorkerID, &l.Term, &l.ElectedAt, &l.ExpiresAt, &l.Valid)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		default:
			d.Leader = &l
		}
		rows, err := tx.Query(ctx, `select task_id, task_type, worker_id, attempt, max_attempts, claimed_at, lease_expires_at
			from queues.task where status = 'running' order by claimed_at, task_id limit $1`, maxRunningShown)
		if err != nil {
			return err
		}
		d.Running, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (runningTask, error) {
			var t runningTask
			err := r.Scan(&t.ID, &t.Type, &t.WorkerID, &t.Attempt, &t.MaxAttempts, &t.ClaimedAt, &t.LeaseExpiresAt)
			return t, err
		})
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "workers", "Workers", "workers", d)
}
