package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the functions of this package need: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ErrWorkerNotFound is returned by QuietWorker and ResumeWorker for an id no registered worker
// has.
var ErrWorkerNotFound = errors.New("worker not found")

// Worker is a registered worker, as ListWorkers returns it.
type Worker struct {
	ID            string    `json:"worker_id"`
	Hostname      string    `json:"hostname"`
	PID           int       `json:"pid,omitempty"`
	StartedAt     time.Time `json:"started_at"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	PoolSize      int       `json:"pool_size"`
	Version       string    `json:"version,omitempty"`
	Transport     string    `json:"transport,omitempty"`
	TaskTypes     []string  `json:"task_types,omitempty"` // nil: all types
	Leader        bool      `json:"leader"`               // holds the unexpired leader lease
	RunningTasks  int       `json:"running_tasks"`        // tasks running under its leases
	// QuietSince is when an operator quieted this worker process (QuietWorker): it finishes what
	// it runs and claims nothing more. Nil: it claims.
	QuietSince *time.Time `json:"quiet_since,omitempty"`
	QuietBy    string     `json:"quiet_by,omitempty"` // who quieted it
}

// ListWorkers returns the registered workers, oldest first. It reads queues.worker,
// queues.leader, queues.worker_quiet and queues.task: an operator's role needs SELECT on them.
func ListWorkers(ctx context.Context, db DB) ([]Worker, error) {
	rows, err := db.Query(ctx, `
		select w.worker_id, w.hostname, coalesce(w.pid, 0), w.started_at, w.last_heartbeat, w.pool_size,
		       coalesce(w.version, ''), coalesce(w.transport, ''), w.task_types,
		       coalesce(l.worker_id = w.worker_id and l.expires_at > now(), false),
		       (select count(*) from queues.task t where t.status = 'running' and t.worker_id = w.worker_id),
		       q.quiet_since, coalesce(q.actor, '')
		from queues.worker w
		left join queues.leader l on l.name = 'default'
		left join queues.worker_quiet q on q.worker_id = w.worker_id and q.instance = coalesce(w.instance, '')
		order by w.started_at, w.worker_id`)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Worker, error) {
		var w Worker
		err := r.Scan(&w.ID, &w.Hostname, &w.PID, &w.StartedAt, &w.LastHeartbeat, &w.PoolSize,
			&w.Version, &w.Transport, &w.TaskTypes, &w.Leader, &w.RunningTasks, &w.QuietSince, &w.QuietBy)
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	return out, nil
}

// QuietWorker tells the registered process of worker id to finish the tasks it runs and claim
// nothing more, from its next heartbeat, recording actor (queues.quiet_worker; docs/operations.md,
// "Quieting a worker"). It reports whether the worker was not quiet already; a worker that is
// not registered is an error wrapping ErrWorkerNotFound.
func QuietWorker(ctx context.Context, db DB, id, actor string) (bool, error) {
	var changed bool
	if err := db.QueryRow(ctx, `select queues.quiet_worker($1, $2)`, id, nullIfEmpty(actor)).Scan(&changed); err != nil {
		return false, workerActionError("quiet worker "+id, err)
	}
	return changed, nil
}

// ResumeWorker lets a quieted worker claim again, from its next heartbeat, recording actor
// (queues.resume_worker). It reports whether the worker was quiet.
func ResumeWorker(ctx context.Context, db DB, id, actor string) (bool, error) {
	var changed bool
	if err := db.QueryRow(ctx, `select queues.resume_worker($1, $2)`, id, nullIfEmpty(actor)).Scan(&changed); err != nil {
		return false, workerActionError("resume worker "+id, err)
	}
	return changed, nil
}

func workerActionError(what string, err error) error {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "P0002" {
		return fmt.Errorf("%w: %s", ErrWorkerNotFound, pgErr.Message)
	}
	return actionError(what, err)
}
