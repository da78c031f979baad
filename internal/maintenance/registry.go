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
