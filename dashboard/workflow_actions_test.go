package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/dashboard"
)

// Retry on a dead node of a workflow's page retries it (with who did it) and returns to the
// page, where the node its death cancelled waits again; refused without the CSRF token, without
// credentials and on a read-only dashboard, which shows no action.
func TestWorkflowRetryNode(t *testing.T) {
	t.Parallel()
	srv, pool, _ := newDashboard(t, dashboard.Config{})
	w := seedWorkflow(t, pool)
	c := browserlessClient(t)
	page := srv.URL + "/workflows/" + itoa(w.root)
	retry := srv.URL + "/tasks/" + itoa(w.reserve) + "/retry"
	code, body, _ := get(t, c, page, bearer()...)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `data-retry-task="`+itoa(w.reserve)+`"`)
	require.Contains(t, body, `id="cancel-workflow"`)
	csrf := csrfFrom(t, body)
	form := url.Values{"csrf_token": {csrf}, "return_to": {"/workflows/" + itoa(w.root)}}

	// A read-only dashboard shows the graph without actions, and refuses them.
	h, err := dashboard.New(pool, dashboard.Config{ReadOnly: true})
	require.NoError(t, err)
	ro := newServer(t, h)
	code, body, _ = get(t, c, ro.URL+"/workflows/"+itoa(w.root))
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `data-task-id="`+itoa(w.reserve)+`" data-status="dead"`)
	require.NotContains(t, body, "data-retry-task=")
	require.NotContains(t, body, `id="cancel-workflow"`)
	code, _ = post(t, c, ro.URL+"/tasks/"+itoa(w.reserve)+"/retry", form)
	require.Equal(t, http.StatusForbidden, code)

	code, _ = post(t, c, retry, url.Values{"return_to": form["return_to"]}, bearer()...)
	require.Equal(t, http.StatusForbidden, code, "no CSRF token")
	code, _ = post(t, c, retry, form)
	require.Equal(t, http.StatusUnauthorized, code, "no credentials")
	require.Equal(t, taskorch.StatusDead, taskStatus(t, pool, w.reserve), "refused: nothing changed")
	require.Equal(t, taskorch.StatusCancelled, taskStatus(t, pool, w.ship))

	code, loc := post(t, c, retry, form, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/workflows/"+itoa(w.root), loc, "back to the graph")
	require.Equal(t, taskorch.StatusPending, taskStatus(t, pool, w.reserve), "its parent completed: due at once")
	require.Equal(t, taskorch.StatusWaiting, taskStatus(t, pool, w.ship), "cancelled by its parent's death, it waits again")
	require.Equal(t, taskorch.StatusWaiting, taskStatus(t, pool, w.archive))
	require.True(t, strings.HasPrefix(actorOf(t, pool, w.reserve, "retried"), "dashboard:"), "who retried it is recorded")
	require.True(t, strings.HasPrefix(actorOf(t, pool, w.ship, "retried"), "dashboard:"), "and who made its child wait again")

	_, body, _ = get(t, c, page, bearer()...)
	nodes, _, _ := graphOf(t, body)
	require.Equal(t, "pending", nodes[w.reserve])
	require.Equal(t, "waiting", nodes[w.ship])
	require.NotContains(t, body, "data-retry-task=", "no failed node left")

}

// Cancel workflow cancels every task of it not ended (waiting, pending, running, failed, dead)
// with the reason and who did it, and says how many; completed and cancelled tasks stay. Refused
// without credentials, CSRF token, on a read-only dashboard, for a bad id or an overlong reason,
// changing nothing; an unknown workflow and one with nothing left are said so.
func TestWorkflowCancelAction(t *testing.T) {
	t.Parallel()
	srv, pool, _ := newDashboard(t, dashboard.Config{})
	w := seedWorkflow(t, pool)
	c := browserlessClient(t)
	page := "/workflows/" + itoa(w.root)
	cancelURL := srv.URL + page + "/cancel"
	code, body, _ := get(t, c, srv.URL+page, bearer()...)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `id="cancel-workflow"`)
	csrf := csrfFrom(t, body)
	form := url.Values{"csrf_token": {csrf}, "return_to": {page}, "reason": {"customer withdrew the order"}}
	unchanged := func() {
		t.Helper()
		_, body, _ := get(t, c, srv.URL+page, bearer()...)
		nodes, _, _ := graphOf(t, body)
		require.Equal(t, w.statuses(), nodes, "nothing changed")
	}

	code, _ = post(t, c, cancelURL, form)
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = post(t, c, cancelURL, url.Values{"return_to": {page}}, bearer()...)
	require.Equal(t, http.StatusForbidden, code, "no CSRF token")
	code, _ = post(t, c, srv.URL+"/workflows/x/cancel", form, bearer()...)
	require.Equal(t, http.StatusBadRequest, code)
	h, err := dashboard.New(pool, dashboard.Config{ReadOnly: true})
	require.NoError(t, err)
	code, _ = post(t, c, newServer(t, h).URL+page+"/cancel", form)
	require.Equal(t, http.StatusForbidden, code, "read-only")
	long := url.Values{"csrf_token": {csrf}, "return_to": {page}, "reason": {strings.Repeat("x", 501)}}
	code, loc := post(t, c, cancelURL, long, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)
	_, body, _ = get(t, c, srv.URL+loc, bearer()...)
	require.Contains(t, body, "Not cancelled: the reason is longer than 500 characters.")
	unchanged()

	code, loc = post(t, c, srv.URL+"/workflows/999999/cancel", form, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, page, loc, "back where it came from")
	_, body, _ = get(t, c, srv.URL+loc, bearer()...)
	require.Contains(t, body, "Not cancelled: there is no workflow 999999.")
	unchanged()

	code, loc = post(t, c, cancelURL, form, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, page, loc)
	_, body, _ = get(t, c, srv.URL+loc, bearer()...)
	require.Contains(t, body, "Cancelled workflow "+itoa(w.root)+": 4 tasks.")
	nodes, _, _ := graphOf(t, body)
	want := map[int64]string{}
	for id := range w.statuses() {
		want[id] = "cancelled"
	}
	want[w.root] = "completed"
	require.Equal(t, want, nodes)
	require.NotContains(t, body, `id="cancel-workflow"`, "nothing left to cancel")
	for _, id := range []int64{w.reserve, w.receipt, w.audit, w.archive} {
		require.True(t, strings.HasPrefix(actorOf(t, pool, id, "cancelled"), "dashboard:"), "who cancelled task %d", id)
		var detail string
		require.NoError(t, pool.QueryRow(t.Context(), `select detail from queues.task_event where task_id = $1 and event = 'cancelled'
			order by task_event_id desc limit 1`, id).Scan(&detail))
		require.Equal(t, "customer withdrew the order", detail)
	}
	require.Equal(t, 1, count(t, pool, `select count(*) from queues.task_event where task_id = $1 and event = 'cancelled'`, w.ship),
		"the task the cascade cancelled before was not cancelled again")

	code, loc = post(t, c, cancelURL, form, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)
	_, body, _ = get(t, c, srv.URL+loc, bearer()...)
	require.Contains(t, body, "Workflow "+itoa(w.root)+" had no task left to cancel.")
}
