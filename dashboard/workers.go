package dashboard

import (
	"context"
	"errors"
	"net/http"
	"strings"
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

// quietWorker tells the worker of the form's worker_id to finish what it runs and claim nothing
// more (admin.QuietWorker); resumeWorker lets it claim again. Both take effect at the worker's
// next heartbeat. The id is a form field, not a path segment: a worker id may hold any character.
func (h *Handler) quietWorker(w http.ResponseWriter, r *http.Request, who identity) {
	h.workerAction(w, r, func(ctx context.Context, id string) (string, error) {
		changed, err := admin.QuietWorker(ctx, h.pool, id, who.actor())
		if !changed {
			return "Worker " + id + " was quiet already.", err
		}
		return "Quieted worker " + id + ": from its next heartbeat it finishes its running tasks and claims nothing more.", err
	})
}

func (h *Handler) resumeWorker(w http.ResponseWriter, r *http.Request, who identity) {
	h.workerAction(w, r, func(ctx context.Context, id string) (string, error) {
		changed, err := admin.ResumeWorker(ctx, h.pool, id, who.actor())
		if !changed {
			return "Worker " + id + " was not quiet.", err
		}
		return "Resumed worker " + id + ": it claims again from its next heartbeat.", err
	})
}

func (h *Handler) workerAction(w http.ResponseWriter, r *http.Request, do func(ctx context.Context, id string) (string, error)) {
	id := strings.TrimSpace(r.PostFormValue("worker_id"))
	back := h.localPathOr(r.PostFormValue("return_to"), h.path("/workers"))
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	msg, err := do(ctx, id)
	switch {
	case errors.Is(err, admin.ErrInvalidInput), errors.Is(err, admin.ErrWorkerNotFound):
		h.setFlash(w, r, "error", redactText(err.Error()))
	case err != nil:
		h.cfg.Logger.Error("dashboard: worker action failed", "worker_id", truncate(130, id), "error", err)
		h.setFlash(w, r, "error", redactText(err.Error()))
	default:
		h.setFlash(w, r, "ok", msg)
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}
