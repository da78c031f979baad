package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An operator's role (select on queues.task, cancel_task, retry_task, and what an application
// has) reads every task whole, lists and pages, enqueues with every option (parents, schedule,
// priority, attempts), cancels and retries, and the task's status decides what is allowed
// (409 otherwise).
func TestAPIAsOperatorRole(t *testing.T) {
	t.Parallel()
	f := newAPI(t)

	appTask := int64(f.call(t, f.appTok, "POST", "/v1/tasks", `{"type": "a.one"}`).json(t)["task_id"].(float64))
	runAt := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	r := f.call(t, f.opsTok, "POST", "/v1/tasks", fmt.Sprintf(
		`{"type": "b.two", "payload": {"x": [1, 2]}, "run_at": %q, "priority": -2, "max_attempts": 4, "after": [%d], "on_parent_failure": "run"}`,
		runAt.Format(time.RFC3339), appTask))
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	child := int64(r.json(t)["task_id"].(float64))

	r = f.call(t, f.opsTok, "GET", fmt.Sprintf("/v1/tasks/%d", child), "")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	got := r.json(t)
	require.Equal(t, "b.two", got["type"])
	require.Equal(t, "waiting", got["status"])
	require.Equal(t, map[string]any{"x": []any{float64(1), float64(2)}}, got["payload"])
	require.Equal(t, float64(-2), got["priority"])
	require.Equal(t, float64(4), got["max_attempts"])
	require.Equal(t, []any{float64(appTask)}, got["parent_ids"])
	at, err := time.Parse(time.RFC3339Nano, got["run_at"].(string))
	require.NoError(t, err)
	require.True(t, at.Equal(runAt), "run_at %s, want %s", at, runAt)

	// The application's task, whole: select on queues.task sees every task.
	r = f.call(t, f.opsTok, "GET", fmt.Sprintf("/v1/tasks/%d", appTask), "")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "a.one", r.json(t)["type"])

	// Listing: filters and keyset pages.
	r = f.call(t, f.opsTok, "GET", "/v1/tasks?type=a.one&type=b.two&limit=1", "")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	page := r.json(t)
	require.Len(t, page["tasks"], 1)
	require.Equal(t, float64(child), page["tasks"].([]any)[0].(map[string]any)["task_id"])
	require.Equal(t, float64(child), page["next"])
	r = f.call(t, f.opsTok, "GET", fmt.Sprintf("/v1/tasks?limit=1&before=%d", child), "")
	page = r.json(t)
	require.Equal(t, float64(appTask), page["tasks"].([]any)[0].(map[string]any)["task_id"])
	require.Nil(t, page["next"], "the last page")
	r = f.call(t, f.opsTok, "GET", "/v1/tasks?status=waiting", "")
	require.Len(t, r.json(t)["tasks"], 1)

	// Cancel, cancel again (the same answer), retry, and a completed task may be neither cancelled nor retried (409).
	r = f.call(t, f.opsTok, "POST", fmt.Sprintf("/v1/tasks/%d/cancel", appTask), "")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, "cancelled", r.json(t)["status"])
	require.Equal(t, true, r.json(t)["finished"])
	r = f.call(t, f.opsTok, "POST", fmt.Sprintf("/v1/tasks/%d/cancel", appTask), "{}")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, "cancelled", r.json(t)["status"])
	r = f.call(t, f.opsTok, "GET", fmt.Sprintf("/v1/tasks/%d/wait?timeout=30", appTask), "")
	require.Equal(t, "cancelled", r.json(t)["status"], "a finished task is answered at once")
	r = f.call(t, f.opsTok, "POST", fmt.Sprintf("/v1/tasks/%d/retry", appTask), "")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, "pending", r.json(t)["status"])
	var lease int64
	require.NoError(t, f.pool.QueryRow(context.Background(),
		`select lease_id from queues.claim_tasks('w1', 10, interval '5 minutes') where task_id = $1`, appTask).Scan(&lease))
	mustExec(t, f.pool, `select queues.complete_task($1, $2)`, appTask, lease)
	r = f.call(t, f.opsTok, "GET", fmt.Sprintf("/v1/tasks/%d", appTask), "")
	finishedAt, err := time.Parse(time.RFC3339Nano, r.json(t)["finished_at"].(string))
	require.NoError(t, err)
	require.True(t, finishedAt.Equal(scalar[time.Time](t, f.pool, `select completed_at from queues.task where task_id = $1`, appTask)),
		"finished_at is the completion's time, not the earlier cancellation's")
	for _, op := range []string{"cancel", "retry"} {
		r = f.call(t, f.opsTok, "POST", fmt.Sprintf("/v1/tasks/%d/%s", appTask, op), "")
		require.Equal(t, http.StatusConflict, r.status, op+": "+string(r.body))
		code, _ := r.errorOf(t)
		require.Equal(t, "wrong_state", code)
	}
	require.Equal(t, "completed", scalar[string](t, f.pool, `select status::text from queues.task where task_id = $1`, appTask))

	// Not found.
	for _, path := range []string{"/v1/tasks/999999/cancel", "/v1/tasks/999999/retry"} {
		r = f.call(t, f.opsTok, "POST", path, "")
		require.Equal(t, http.StatusNotFound, r.status, path+": "+string(r.body))
	}
	r = f.call(t, f.opsTok, "GET", "/v1/tasks/999999", "")
	require.Equal(t, http.StatusNotFound, r.status)

	r = f.call(t, f.opsTok, "POST", "/v1/signals", `{"name": "n", "key": "k"}`)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
}
