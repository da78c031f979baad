package admin

import (
	"context"
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
}

// ListWorkers returns the registered workers, oldest first. It reads queues.worker,
// queues.leader and queues.task: an operator's role needs SELECT on them.
func ListWorkers(ctx context.Context, db DB) ([]Worker, error) {
	rows, err := db.Query(ctx, `
		select w.worker_id, w.hostname, coalesce(w.pid, 0), w.started_at, w.last_heartbeat, w.pool_size,
		       coalesce(w.version, ''), coalesce(w.transport, ''), w.task_types,
		       coalesce(l.worker_id = w.worker_id and l.expires_at > now(), false),
		       (select count(*) from queues.task t where t.status = 'running' and t.worker_id = w.worker_id)
		from queues.worker w
		left join queues.leader l on l.name = 'default'
		order by w.started_at, w.worker_id`)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Worker, error) {
		var w Worker
		err := r.Scan(&w.ID, &w.Hostname, &w.PID, &w.StartedAt, &w.LastHeartbeat, &w.PoolSize,
			&w.Version, &w.Transport, &w.TaskTypes, &w.Leader, &w.RunningTasks)
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	return out, nil
}
