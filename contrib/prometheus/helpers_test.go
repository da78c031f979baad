package prometheus_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

func scalar[T any](t testing.TB, db taskorch.DBTX, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, db.QueryRow(context.Background(), sql, args...).Scan(&v))
	return v
}

func mustExec(t testing.TB, db taskorch.DBTX, sql string, args ...any) {
	t.Helper()
	_, err := db.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// newClient gives a test its own migrated database and a client over it.
func newClient(t *testing.T) (*taskorch.Client, *pgxpool.Pool) {
	t.Helper()
	pool := dbtest.NewDB(t)
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	return c, pool
}

// noRetryDelay makes retries due at once in this test's database, so a test can walk a task
// through its attempts without waiting out the backoff.
func noRetryDelay(t testing.TB, db taskorch.DBTX) {
	t.Helper()
	mustExec(t, db, `update queues.settings set retry_backoff_max = interval '0'`)
}

func raw(typ, payload string) taskorch.RawArgs {
	return taskorch.RawArgs{Type: typ, Payload: []byte(payload)}
}
