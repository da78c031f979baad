package dashboard_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/dashboard"
)

// The queues page and the overview list each SQL function as a queue of its own,
// db_function:<schema.function>, linking to its type's tasks; the pause form pauses one
// function; pausing db_function shows on every function's line, whose Resume is db_function's.
func TestQueuesPageListsFunctions(t *testing.T) {
	t.Parallel()
	srv, pool, _ := newDashboard(t, dashboard.Config{})
	c := browserlessClient(t)
	const row = `data-queue="db_function:demo.ship_order_supervisor"`

	for _, path := range []string{"/queues", "/"} {
		code, body, _ := get(t, c, srv.URL+path, bearer()...)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, row, path)
		require.Contains(t, body, `<a href="/tasks?type=db_function">db_function:demo.ship_order_supervisor</a>`, path)
		require.NotContains(t, body, `data-queue="db_function"`, "%s: every task names its function", path)
	}

	// The form pauses one function by its queue's name.
	_, body, _ := get(t, c, srv.URL+"/queues", bearer()...)
	token := csrfFrom(t, body)
	code, _ := post(t, c, srv.URL+"/queues/_/pause", url.Values{"csrf_token": {token}, "task_type": {"db_function:demo.ship_order_supervisor"}}, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)
	tc, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	paused, err := tc.PausedQueues(t.Context())
	require.NoError(t, err)
	var names []string
	for _, p := range paused {
		names = append(names, p.TaskType)
	}
	require.Contains(t, names, "db_function:demo.ship_order_supervisor")
	code, _ = post(t, c, srv.URL+"/queues/db_function:demo.ship_order_supervisor/resume", url.Values{"csrf_token": {token}}, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)

	// Pausing db_function: its line, and the function's line held by it, with no Resume of its own.
	code, _ = post(t, c, srv.URL+"/queues/db_function/pause", url.Values{"csrf_token": {token}}, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)
	_, body, _ = get(t, c, srv.URL+"/queues", bearer()...)
	require.Contains(t, body, `data-queue="db_function"`)
	require.Contains(t, body, `action="/queues/db_function/resume"`)
	require.Contains(t, body, "paused with db_function")
	require.NotContains(t, body, `action="/queues/db_function:demo.ship_order_supervisor/resume"`)
	require.NotContains(t, body, `action="/queues/db_function:demo.ship_order_supervisor/pause"`)
}
