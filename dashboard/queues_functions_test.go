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
// db_function:<schema.function>, linking to that function's tasks alone (the task list and the
// dead and failed pages filter by the queue's name); the pause form pauses one function; pausing
// db_function shows on every function's line, whose Resume is db_function's.
func TestQueuesPageListsFunctions(t *testing.T) {
	t.Parallel()
	srv, pool, s := newDashboard(t, dashboard.Config{})
	c := browserlessClient(t)
	const row = `data-queue="db_function:demo.ship_order_supervisor"`
	// A task of another function, and a dead one of each: the function's links show its own.
	ctx := t.Context()
	_, err := pool.Exec(ctx, `create function demo.other_fn(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$`)
	require.NoError(t, err)
	var other, deadOther, deadOwn int64
	require.NoError(t, pool.QueryRow(ctx, `select queues.enqueue('db_function', '{"db_function": "demo.other_fn"}'),
		queues.enqueue('db_function', '{"db_function": "demo.other_fn", "n": 2}'),
		queues.enqueue('db_function', '{"db_function": "demo.ship_order_supervisor", "n": 2}')`).Scan(&other, &deadOther, &deadOwn))
	_, err = pool.Exec(ctx, `update queues.task set status = 'dead', dead_at = now() where task_id = any ($1)`, []int64{deadOther, deadOwn})
	require.NoError(t, err)

	for _, path := range []string{"/queues", "/"} {
		code, body, _ := get(t, c, srv.URL+path, bearer()...)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, row, path)
		require.Contains(t, body, `<a href="/tasks?type=db_function%3ademo.ship_order_supervisor">db_function:demo.ship_order_supervisor</a>`, path)
		require.Contains(t, body, `<a href="/dead?type=db_function%3ademo.ship_order_supervisor">1</a>`, path)
		require.NotContains(t, body, `data-queue="db_function"`, "%s: every task names its function", path)
	}
	for _, tc := range []struct {
		path     string
		has, not []int64
	}{
		{"/tasks?type=db_function:demo.ship_order_supervisor", []int64{s.supervisorTask, deadOwn}, []int64{other, deadOther, s.channelTask}},
		{"/tasks?type=db_function:demo.other_fn", []int64{other, deadOther}, []int64{s.supervisorTask, deadOwn}},
		{"/tasks?type=db_function", []int64{s.supervisorTask, other, deadOwn, deadOther}, []int64{s.channelTask}},
		{"/dead?type=db_function:demo.ship_order_supervisor", []int64{deadOwn}, []int64{deadOther}},
		{"/tasks?type=db_function:demo.nothing", nil, []int64{s.supervisorTask, other}},
	} {
		code, body, _ := get(t, c, srv.URL+tc.path, bearer()...)
		require.Equal(t, http.StatusOK, code, tc.path)
		for _, id := range tc.has {
			require.Contains(t, body, `data-task-id="`+itoa(id)+`"`, "%s lists %d", tc.path, id)
		}
		for _, id := range tc.not {
			require.NotContains(t, body, `data-task-id="`+itoa(id)+`"`, "%s does not list %d", tc.path, id)
		}
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
