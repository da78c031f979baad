package maintenance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what ReapDeadWorkers and PruneFinished need: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
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

// registerOn registers this worker process (queues.register_worker_instance) through db: its
// session when session is true (db is then the session's connection, which takes the session
// lock), else the pool. It returns the number of running tasks of a previous process under the
// same id that it recovered (taking the id over); it fails with SQLSTATE 55006 while that
// process lives.
func (m *Maintainer) registerOn(ctx context.Context, db DB, session bool) (int, error) {
	var version *string
	if m.cfg.Version != "" {
		version = &m.cfg.Version
	}
	transport := "postgres"
	if m.cfg.Transport != nil {
		transport = m.cfg.Transport.Name()
	}
	var key *int32
	var recovered int
	err := db.QueryRow(ctx, `select session_key, tasks_recovered
		from queues.register_worker_instance($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		m.cfg.WorkerID, m.instance, m.cfg.Hostname, m.cfg.PID, m.cfg.PoolSize, version, transport, m.cfg.TaskTypes,
		session, m.cfg.WorkerTimeout).Scan(&key, &recovered)
	return recovered, err
}

// deregister removes the worker's row at shutdown (and its leadership, if it still held it):
// the row of this process, not of another that took its id over.
func (m *Maintainer) deregister(ctx context.Context) {
	if _, err := m.pool.Exec(ctx, `select queues.deregister_worker($1, $2)`, m.cfg.WorkerID, m.instance); err != nil {
		m.log.Warn("maintenance: deregister failed; the leader will reap this worker after the worker timeout",
			slog.Any("error", err))
		return
	}
	m.registered.Store(false)
}

// newInstance returns a random name for this worker process (16 hex digits).
func newInstance() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}
