package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Bad input is answered 400 with a message that says what was wrong, and writes nothing: no
// task, no signal. The answer never holds the token.
func TestAPIBadInput(t *testing.T) {
	t.Parallel()
	f := newAPI(t)
	id := scalar[int64](t, f.pool, `select queues.enqueue('x.y', '{}')`)
	cases := []struct {
		method, path, body string
		want               string // in the message
	}{
		{"POST", "/v1/tasks", `{"type": "x.y"`, "malformed JSON"},
		{"POST", "/v1/tasks", `not json`, "must be a JSON object"},
		{"POST", "/v1/tasks", ``, "must be a JSON object"},
		{"POST", "/v1/tasks", `[{"type": "x.y"}]`, "must be a JSON object"},
		{"POST", "/v1/tasks", `{"type": "x.y"} {"type": "x.y"}`, "data after the object"},
		{"POST", "/v1/tasks", `{"type": "x.y", "colour": "red"}`, `unknown field "colour"`},
		{"POST", "/v1/tasks", `{"payload": {}}`, "type is required"},
		{"POST", "/v1/tasks", `{"type": "bad type; drop table x"}`, "malformed"},
		{"POST", "/v1/tasks", `{"type": "x.y", "payload": [1]}`, "JSON object"},
		{"POST", "/v1/tasks", `{"type": "x.y", "payload": "s"}`, "JSON object"},
		{"POST", "/v1/tasks", `{"type": "x.y", "priority": "high"}`, `field "priority" must be an integer`},
		{"POST", "/v1/tasks", `{"type": "x.y", "priority": 3000000000}`, "priority"},
		{"POST", "/v1/tasks", `{"type": "x.y", "max_attempts": 0.5}`, "max_attempts"},
		{"POST", "/v1/tasks", `{"type": "x.y", "max_attempts": -1}`, "max_attempts"},
		{"POST", "/v1/tasks", `{"type": "x.y", "run_at": "tomorrow"}`, "run_at"},
		{"POST", "/v1/tasks", `{"type": "x.y", "run_at": "0001-01-01T00:00:00Z"}`, "run_at"},
		{"POST", "/v1/tasks", `{"type": "x.y", "after": []}`, "after"},
		{"POST", "/v1/tasks", `{"type": "x.y", "after": [987654321]}`, "987654321"},
		{"POST", "/v1/tasks", `{"type": "x.y", "on_parent_failure": "run"}`, "After"},
		{"POST", "/v1/tasks", `{"type": "x.y", "idempotency_key": "tick:x"}`, "tick:"},
		{"POST", "/v1/tasks", `{"type": "x.y", "idempotency_key": "` + strings.Repeat("k", 513) + `"}`, "512"},
		{"POST", "/v1/tasks", `{"type": "x.y", "payload": {"big": "` + strings.Repeat("a", 3<<20) + `"}}`, "over"},
		{"GET", "/v1/tasks/abc", "", "positive integer"},
		{"GET", "/v1/tasks/0", "", "positive integer"},
		{"GET", "/v1/tasks/-4", "", "positive integer"},
		{"GET", "/v1/tasks/99999999999999999999", "", "positive integer"},
		{"GET", "/v1/tasks/1x/wait", "", "positive integer"},
		{"GET", fmt.Sprintf("/v1/tasks/%d/wait?timeout=soon", id), "", "timeout"},
		{"GET", fmt.Sprintf("/v1/tasks/%d/wait?timeout=-1", id), "", "timeout"},
		{"GET", fmt.Sprintf("/v1/tasks/%d/wait?timeout=NaN", id), "", "timeout"},
		{"GET", fmt.Sprintf("/v1/tasks/%d/wait?timeout=Inf", id), "", "timeout"},
		{"GET", fmt.Sprintf("/v1/tasks/%d/wait?tmeout=1", id), "", "unknown query parameter"},
		{"GET", "/v1/tasks?limit=0", "", "limit"},
		{"GET", "/v1/tasks?limit=10001", "", "limit"},
		{"GET", "/v1/tasks?before=x", "", "before"},
		{"GET", "/v1/tasks?status=sleeping", "", "sleeping"},
		{"GET", "/v1/tasks?type=a%20b", "", "malformed"},
		{"GET", "/v1/tasks?colour=red", "", "unknown query parameter"},
		{"POST", fmt.Sprintf("/v1/tasks/%d/cancel", id), `{"reason": "x"}`, "no body"},
		{"POST", "/v1/signals", `{"name": "", "key": "k"}`, "name"},
		{"POST", "/v1/signals", `{"name": "n", "key": ""}`, "key"},
		{"POST", "/v1/signals", `{"name": "n", "key": "k", "payload": [1]}`, "JSON object"},
		{"POST", "/v1/signals", `{"name": "n", "key": "k", "extra": 1}`, "unknown field"},
	}
	tasks := taskCount(t, f.pool)
	for _, c := range cases {
		r := f.call(t, f.opsTok, c.method, c.path, c.body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s %s %.80s: %s", c.method, c.path, c.body, r.body)
		code, msg := r.errorOf(t)
		require.Equal(t, "invalid_input", code)
		require.Contains(t, msg, c.want, "%s %s %.80s", c.method, c.path, c.body)
		require.NotContains(t, string(r.body), f.opsTok)
	}
	require.Equal(t, tasks, taskCount(t, f.pool), "bad input wrote a task")
	require.Equal(t, int64(0), scalar[int64](t, f.pool, `select count(*) from queues.signal`), "bad input wrote a signal")
	require.Equal(t, "pending", scalar[string](t, f.pool, `select status::text from queues.task where task_id = $1`, id))

	// A route that does not exist is 404, whoever asks.
	r := f.call(t, f.opsTok, "GET", "/v1/nothing", "")
	require.Equal(t, http.StatusNotFound, r.status)
	r = f.call(t, f.opsTok, "DELETE", fmt.Sprintf("/v1/tasks/%d", id), "")
	require.Equal(t, http.StatusNotFound, r.status, "no route deletes a task")
}
