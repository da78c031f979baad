package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/dashboard"
)

// Cancelling a durable workflow's task from the dashboard cancels, after it, the tasks the
// workflow spawned that have not ended, as Client.Cancel does, recording who did it.
func TestCancelTaskReachesSpawnedTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, pool, _ := newDashboard(t, dashboard.Config{})
	var wf, lease, child int64
	require.NoError(t, pool.QueryRow(ctx, `select queues.enqueue('dash.durable', '{}')`).Scan(&wf))
	require.NoError(t, pool.QueryRow(ctx, `select lease_id from queues.claim_tasks_by_id('w', array[$1::bigint], interval '5 minutes', array['dash.durable'])`, wf).Scan(&lease))
	require.NoError(t, pool.QueryRow(ctx, `select spawned_task_id from queues.spawn_workflow_task($1, $2, 1, 'child', 'dash.child', '{}')`, wf, lease).Scan(&child))

	c := browserlessClient(t)
	code, body, _ := get(t, c, srv.URL+"/tasks/"+itoa(wf), bearer()...)
	require.Equal(t, http.StatusOK, code)
	form := url.Values{"csrf_token": {csrfFrom(t, body)}, "return_to": {"/tasks/" + itoa(wf)}}
	code, _ = post(t, c, srv.URL+"/tasks/"+itoa(wf)+"/cancel", form, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, taskorch.StatusCancelled, taskStatus(t, pool, wf))
	require.Equal(t, taskorch.StatusCancelled, taskStatus(t, pool, child), "the task the workflow spawned is cancelled too")
	require.True(t, strings.HasPrefix(actorOf(t, pool, child, "cancelled"), "dashboard:"), "who cancelled it is recorded")
	_, body, _ = get(t, c, srv.URL+"/tasks/"+itoa(wf), bearer()...)
	require.Contains(t, body, "Cancelled 1 task(s) it spawned.")
}
