package admin

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// seedTask enqueues a task of type typ and puts it in status (for finished ones, finished ago
// before now), as the workers would leave it. It returns the task's id.
func seedTask(t *testing.T, db DB, typ, status string, ago time.Duration) int64 {
	t.Helper()
	var id int64
	require.NoError(t, db.QueryRow(t.Context(), `select queues.enqueue($1, '{}')`, typ).Scan(&id))
	var sql string
	switch status {
	case "pending":
		return id
	case "running":
		sql = `update queues.task set status = 'running', attempt = 1, lease_id = 1, worker_id = 'seed-worker',
			claimed_at = now() - $2::interval, lease_expires_at = now() + interval '5 minutes' where task_id = $1`
	case "dead":
		sql = `update queues.task set status = 'dead', attempt = 2, dead_at = now() - $2::interval, last_error = 'boom' where task_id = $1`
	case "failed":
		sql = `update queues.task set status = 'failed', attempt = 1, failed_at = now() - $2::interval, last_error = 'bad' where task_id = $1`
	case "completed":
		sql = `update queues.task set status = 'completed', attempt = 1, completed_at = now() - $2::interval where task_id = $1`
	case "cancelled":
		sql = `update queues.task set status = 'cancelled', cancelled_at = now() - $2::interval where task_id = $1`
	default:
		t.Fatalf("seedTask: status %q", status)
	}
	_, err := db.Exec(t.Context(), sql, id, ago)
	require.NoError(t, err)
	return id
}

func taskStatus(t *testing.T, db DB, id int64) string {
	t.Helper()
	var s string
	require.NoError(t, db.QueryRow(t.Context(), `select status::text from queues.task where task_id = $1`, id).Scan(&s))
	return s
}

func count(t *testing.T, db DB, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.QueryRow(t.Context(), sql, args...).Scan(&n), sql)
	return n
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
