package taskorch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// enqueueAfter enqueues a task of type typ waiting for parents under policy (cancel or run)
// with queues.enqueue, and returns its id.
func enqueueAfter(t testing.TB, db taskorch.DBTX, typ string, policy string, parents ...int64) int64 {
	t.Helper()
	return scalar[int64](t, db, `select queues.enqueue($1, '{}', _after => $2, _on_parent_failure => $3)`, typ, parents, policy)
}

// claimOne claims the one due task of type typ and returns its lease.
func claimOne(t testing.TB, db taskorch.DBTX, typ string, id int64) int64 {
	t.Helper()
	var lease int64
	require.NoError(t, db.QueryRow(context.Background(),
		`select lease_id from queues.claim_tasks_by_id('wf-test', array[$1::bigint], interval '5 minutes', array[$2])`, id, typ).Scan(&lease),
		"task %d was not claimable", id)
	return lease
}

// completeUnder completes tasks under their leases (the worker's completion statement) and
// returns each one's outcome.
func completeUnder(t testing.TB, db taskorch.DBTX, ids, leases []int64) map[int64]string {
	t.Helper()
	rows, err := db.Query(context.Background(),
		`select task_id, status from queues.complete_tasks_with_results($1, $2, null)`, ids, leases)
	require.NoError(t, err)
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var s string
		require.NoError(t, rows.Scan(&id, &s))
		out[id] = s
	}
	require.NoError(t, rows.Err())
	return out
}

// statusOf reads a task's status.
func statusOf(t testing.TB, db taskorch.DBTX, id int64) string {
	t.Helper()
	return scalar[string](t, db, `select status::text from queues.task where task_id = $1`, id)
}

// cancelReason is the detail of a task's cancellation event.
func cancelReason(t testing.TB, db taskorch.DBTX, id int64) string {
	t.Helper()
	return scalar[string](t, db, `select coalesce(detail, '') from queues.task_event
		where task_id = $1 and event = 'cancelled' order by task_event_id desc limit 1`, id)
}
