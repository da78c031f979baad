package maintenance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the listing and schedule functions need: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// NewWorkerID returns a worker id unique to this process: hostname-pid-random (8 hex digits).
func NewWorkerID(hostname string, pid int) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	if len(hostname) > 200 {
		hostname = hostname[:200]
	}
	return hostname + "-" + strconv.Itoa(pid) + "-" + hex.EncodeToString(b[:])
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

// register writes the worker's row (queues.register_worker, an upsert).
func (m *Maintainer) register(ctx context.Context) error {
	var version *string
	if m.cfg.Version != "" {
		version = &m.cfg.Version
	}
	transport := "postgres"
	if m.cfg.Transport != nil {
		transport = m.cfg.Transport.Name()
	}
	_, err := m.pool.Exec(ctx, `select queues.register_worker($1, $2, $3, $4, $5, $6, $7)`,
		m.cfg.WorkerID, m.cfg.Hostname, m.cfg.PID, m.cfg.PoolSize, version, transport, m.cfg.TaskTypes)
	return err
}

// deregister removes the worker's row at shutdown (and its leadership, if it still held it).
func (m *Maintainer) deregister(ctx context.Context) {
	if _, err := m.pool.Exec(ctx, `select queues.deregister_worker($1)`, m.cfg.WorkerID); err != nil {
		m.log.Warn("maintenance: deregister failed; the leader will reap this worker after the worker timeout",
			slog.Any("error", err))
		return
	}
	m.registered.Store(false)
}
