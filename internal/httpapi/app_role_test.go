package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// An application's role (queues.grant_enqueue and queues.signal) enqueues, reads and waits for
// its own tasks and signals through the API; it cannot see another role's task (404, as one
// that does not exist), list tasks, cancel or retry (403 with the database's message), and a
// refused request writes nothing.
func TestAPIAsApplicationRole(t *testing.T) {
	t.Parallel()
	f := newAPI(t)

	r := f.call(t, f.appTok, "POST", "/v1/tasks", `{"type": "report.send", "payload": {"account_id": 7}, "idempotency_key": "r-7", "priority": 3}`)
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	id := int64(r.json(t)["task_id"].(float64))
	require.False(t, r.json(t)["duplicate"].(bool))
	require.Equal(t, f.app, scalar[string](t, f.pool, `select enqueued_by from queues.task where task_id = $1`, id),
		"the task is recorded as the token's role's")

	r = f.call(t, f.appTok, "POST", "/v1/tasks", `{"type": "report.send", "payload": {"account_id": 8}, "idempotency_key": "r-7"}`)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, map[string]any{"task_id": float64(id), "duplicate": true}, r.json(t))

	// Its own task, through queues.get_task_status: no type, payload or priority.
	r = f.call(t, f.appTok, "GET", fmt.Sprintf("/v1/tasks/%d", id), "")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	got := r.json(t)
	require.Equal(t, "pending", got["status"])
	require.Equal(t, false, got["finished"])
	require.NotContains(t, got, "payload")
	require.NotContains(t, got, "type")

	// Another role's task is not found, as one that does not exist.
	other := scalar[int64](t, f.pool, `select queues.enqueue('report.send', '{}')`)
	for _, path := range []string{fmt.Sprintf("/v1/tasks/%d", other), fmt.Sprintf("/v1/tasks/%d/wait?timeout=0", other), "/v1/tasks/999999"} {
		r = f.call(t, f.appTok, "GET", path, "")
		require.Equal(t, http.StatusNotFound, r.status, path)
		code, _ := r.errorOf(t)
		require.Equal(t, "not_found", code)
	}

	// Listing needs select on queues.task; cancel and retry, their functions.
	r = f.call(t, f.appTok, "GET", "/v1/tasks", "")
	require.Equal(t, http.StatusForbidden, r.status, string(r.body))
	code, msg := r.errorOf(t)
	require.Equal(t, "forbidden", code)
	require.Contains(t, msg, "permission denied")
	for _, op := range []string{"cancel", "retry"} {
		r = f.call(t, f.appTok, "POST", fmt.Sprintf("/v1/tasks/%d/%s", id, op), "")
		require.Equal(t, http.StatusForbidden, r.status, op)
		_, msg := r.errorOf(t)
		require.Contains(t, msg, op+"_task", op)
	}
	require.Equal(t, "pending", scalar[string](t, f.pool, `select status::text from queues.task where task_id = $1`, id))

	// Signals.
	r = f.call(t, f.appTok, "POST", "/v1/signals", `{"name": "payment.received", "key": "order-1", "payload": {"amount": 12}}`)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, map[string]any{"recorded": true}, r.json(t))
	r = f.call(t, f.appTok, "POST", "/v1/signals", `{"name": "payment.received", "key": "order-1"}`)
	require.Equal(t, map[string]any{"recorded": false}, r.json(t), "the first emit wins")

	// Wait: at once while pending (timeout 0), then until a worker completes it with a result.
	r = f.call(t, f.appTok, "GET", fmt.Sprintf("/v1/tasks/%d/wait?timeout=0", id), "")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, false, r.json(t)["finished"])
	done := make(chan response, 1)
	go func() { done <- f.call(t, f.appTok, "GET", fmt.Sprintf("/v1/tasks/%d/wait?timeout=60", id), "") }()
	var lease int64
	require.NoError(t, f.pool.QueryRow(context.Background(),
		`select lease_id from queues.claim_tasks('w1', 10, interval '5 minutes') where task_id = $1`, id).Scan(&lease))
	mustExec(t, f.pool, `select queues.complete_tasks_with_results(array[$1::bigint], array[$2::bigint], array['{"sent": true}'::jsonb])`, id, lease)
	r = <-done
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	got = r.json(t)
	require.Equal(t, "completed", got["status"])
	require.Equal(t, true, got["finished"])
	require.Equal(t, map[string]any{"sent": true}, got["result"])
	require.NotEmpty(t, got["finished_at"])
}
