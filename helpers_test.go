package taskorch_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// claimed is what a worker gets back from queues.claim_tasks.
type claimed struct {
	TaskID  int64
	LeaseID int64
	Attempt int
	Type    string
}

func claim(t testing.TB, db taskorch.DBTX, worker string, n int, lease string) []claimed {
	t.Helper()
	rows, err := db.Query(context.Background(),
		`select task_id, lease_id, attempt, task_type from queues.claim_tasks($1, $2, $3::interval)`, worker, n, lease)
	require.NoError(t, err)
	defer rows.Close()
	var out []claimed
	for rows.Next() {
		var c claimed
		require.NoError(t, rows.Scan(&c.TaskID, &c.LeaseID, &c.Attempt, &c.Type))
		out = append(out, c)
	}
	require.NoError(t, rows.Err())
	return out
}

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

// waitLeaseExpired waits, on the database's clock, until the task's lease has expired.
func waitLeaseExpired(t testing.TB, db taskorch.DBTX, taskID int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		return scalar[bool](t, db, `select lease_expires_at < clock_timestamp() from queues.task where task_id = $1`, taskID)
	}, 10*time.Second, 2*time.Millisecond)
}

func raw(typ, payload string) taskorch.RawArgs {
	return taskorch.RawArgs{Type: typ, Payload: []byte(payload)}
}
