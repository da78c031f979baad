package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/dashboard"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

const (
	annToken = "ann-token-0123456789abcdef"
	bobToken = "bob-token-0123456789abcdef"
)

// Each named token acts as its holder: a bearer request and a session signed in with it record
// "dashboard:<name>" with what they do, and the header says who you act as. Changing one name's
// token signs only that name out.
func TestNamedTokensActAsTheirHolder(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	s := seed(t, pool)
	key := []byte("a-secret-key-shared-by-replicas")
	h, err := dashboard.New(pool, dashboard.Config{Tokens: map[string]string{"ann": annToken, "bob": bobToken}, SecretKey: key})
	require.NoError(t, err)
	srv := newServer(t, h)
	c := browserlessClient(t)

	_, body, _ := get(t, c, srv.URL+"/tasks/"+itoa(s.dead), "Authorization", "Bearer "+annToken)
	require.Contains(t, body, `id="actor" title="recorded with your actions">dashboard:ann</span>`)
	code, _ := post(t, c, srv.URL+"/tasks/"+itoa(s.dead)+"/retry", url.Values{"csrf_token": {csrfFrom(t, body)}}, "Authorization", "Bearer "+annToken)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "dashboard:ann", actorOf(t, pool, s.dead, "retried"))
	_, body, _ = get(t, c, srv.URL+"/tasks/"+itoa(s.dead), "Authorization", "Bearer "+annToken)
	require.Contains(t, body, `<span class="actor">dashboard:ann</span>`, "the task's page says who retried it")

	// Bob signs in: his session acts as him.
	bob := browserlessClient(t)
	_, body, _ = get(t, bob, srv.URL+"/login")
	code, _ = post(t, bob, srv.URL+"/login", url.Values{"csrf_token": {csrfFrom(t, body)}, "token": {bobToken}})
	require.Equal(t, http.StatusSeeOther, code)
	_, body, _ = get(t, bob, srv.URL+"/tasks/"+itoa(s.pending))
	require.Contains(t, body, ">dashboard:bob</span>")
	code, _ = post(t, bob, srv.URL+"/tasks/"+itoa(s.pending)+"/cancel", url.Values{"csrf_token": {csrfFrom(t, body)}})
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "dashboard:bob", actorOf(t, pool, s.pending, "cancelled"))
	code, _ = post(t, bob, srv.URL+"/queues/report.build/pause", url.Values{"csrf_token": {csrfFrom(t, body)}})
	require.Equal(t, http.StatusSeeOther, code)
	var pausedBy string
	require.NoError(t, pool.QueryRow(t.Context(), `select paused_by from queues.queue_pause where task_type = 'report.build'`).Scan(&pausedBy))
	require.Equal(t, "dashboard:bob", pausedBy)

	// Bob's token changes on a replica sharing the key: his session is refused there, Ann's
	// token still works.
	h2, err := dashboard.New(pool, dashboard.Config{Tokens: map[string]string{"ann": annToken, "bob": bobToken + "-new"}, SecretKey: key})
	require.NoError(t, err)
	srv2 := newServer(t, h2)
	bob.Jar.SetCookies(mustURL(t, srv2.URL), bob.Jar.Cookies(mustURL(t, srv.URL)))
	code, _, _ = get(t, bob, srv2.URL+"/tasks")
	require.Equal(t, http.StatusUnauthorized, code, "bob's session was signed with his old token")
	code, _, _ = get(t, bob, srv.URL+"/tasks")
	require.Equal(t, http.StatusOK, code, "still valid where his token is unchanged")
	code, _, _ = get(t, c, srv2.URL+"/tasks", "Authorization", "Bearer "+annToken)
	require.Equal(t, http.StatusOK, code)
	code, _, _ = get(t, c, srv2.URL+"/tasks", "Authorization", "Bearer "+bobToken)
	require.Equal(t, http.StatusUnauthorized, code)
}

// "All N matching" acts on every task the filter matches, on every page, not only the rows
// shown; refused without a status, with a status the action does not take, without the CSRF
// token or on a read-only dashboard, changing nothing.
func TestActionOnAllMatching(t *testing.T) {
	t.Parallel()
	srv, pool, s := newDashboard(t, dashboard.Config{})
	_, err := pool.Exec(t.Context(), `select queues.enqueue('bulk.job', jsonb_build_object('n', i)) from generate_series(1, 60) i`)
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), `update queues.task set status = 'dead', attempt = 1, dead_at = now() where task_type = 'bulk.job'`)
	require.NoError(t, err)
	c := browserlessClient(t)

	_, body, _ := get(t, c, srv.URL+"/dead?type=bulk.job&limit=25", bearer()...)
	require.Equal(t, 25, strings.Count(body, `<tr data-task-id=`), "one page of 25")
	require.Contains(t, body, `data-matching="60">60</strong>`)
	for _, a := range []string{"retry", "cancel", "delete"} {
		require.Contains(t, body, `formaction="/bulk/`+a+`"`)
	}
	token := csrfFrom(t, body)
	form := url.Values{"csrf_token": {token}, "status": {"dead"}, "type": {"bulk.job"}, "return_to": {"/dead?type=bulk.job"}}

	for _, bad := range []struct {
		path string
		form url.Values
		hdr  []string
		code int
	}{
		{"/bulk/retry", url.Values{"status": {"dead"}, "type": {"bulk.job"}}, bearer(), http.StatusForbidden}, // no CSRF token
		{"/bulk/retry", form, nil, http.StatusUnauthorized},                                                   // not signed in
		{"/bulk/restart", form, bearer(), http.StatusNotFound},
	} {
		code, _ := post(t, c, srv.URL+bad.path, bad.form, bad.hdr...)
		require.Equal(t, bad.code, code, "%+v", bad)
	}
	for _, f := range []url.Values{
		{"csrf_token": {token}, "type": {"bulk.job"}},                          // no status
		{"csrf_token": {token}, "status": {"completed"}, "type": {"bulk.job"}}, // retry takes no completed task
		{"csrf_token": {token}, "status": {"dead"}, "type": {"bad type"}},
	} {
		code, loc := post(t, c, srv.URL+"/bulk/retry", f, bearer()...)
		require.Equal(t, http.StatusSeeOther, code)
		_, body, _ := get(t, c, srv.URL+loc, bearer()...)
		require.Contains(t, body, `class="flash flash-error"`, f)
	}
	require.Zero(t, count64(t, pool, `select count(*) from queues.task where task_type = 'bulk.job' and status <> 'dead'`), "nothing changed")

	code, loc := post(t, c, srv.URL+"/bulk/retry", form, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/dead?type=bulk.job", loc)
	_, body, _ = get(t, c, srv.URL+loc, bearer()...)
	require.Contains(t, body, "Retried all 60 matching tasks.")
	require.Equal(t, int64(60), count64(t, pool, `select count(*) from queues.task t where task_type = 'bulk.job' and status = 'pending'
		and exists (select from queues.task_event e where e.task_id = t.task_id and e.event = 'retried' and e.actor = 'dashboard:token')`))
	require.Equal(t, taskorch.StatusDead, taskStatus(t, pool, s.dead), "another type's dead task stays")

	// Read-only: refused.
	ro, err := dashboard.New(pool, dashboard.Config{ReadOnly: true, Token: testToken})
	require.NoError(t, err)
	srvRO := newServer(t, ro)
	_, body, _ = get(t, c, srvRO.URL+"/tasks?status=pending&type=bulk.job", bearer()...)
	require.NotContains(t, body, "/bulk/")
	code, _ = post(t, c, srvRO.URL+"/bulk/cancel", url.Values{"csrf_token": {csrfFrom(t, body)}, "status": {"pending"}}, bearer()...)
	require.Equal(t, http.StatusForbidden, code)
	require.Equal(t, int64(60), count64(t, pool, `select count(*) from queues.task where task_type = 'bulk.job' and status = 'pending'`))
}

// Delete from a task's page: a finished task goes (and its page with it), a running one is
// refused and stays.
func TestDeleteFromTaskPage(t *testing.T) {
	t.Parallel()
	srv, pool, s := newDashboard(t, dashboard.Config{})
	c := browserlessClient(t)
	_, body, _ := get(t, c, srv.URL+"/tasks/"+itoa(s.completed), bearer()...)
	require.Contains(t, body, `id="delete"`)
	code, loc := post(t, c, srv.URL+"/tasks/"+itoa(s.completed)+"/delete",
		url.Values{"csrf_token": {csrfFrom(t, body)}, "return_to": {"/tasks/" + itoa(s.completed)}}, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/tasks", loc, "its page is gone")
	_, body, _ = get(t, c, srv.URL+loc, bearer()...)
	require.Contains(t, body, "Deleted task "+itoa(s.completed)+".")
	require.Zero(t, count64(t, pool, `select count(*) from queues.task where task_id = $1`, s.completed))

	_, body, _ = get(t, c, srv.URL+"/tasks/"+itoa(s.running), bearer()...)
	require.NotContains(t, body, `id="delete"`, "no button for a running task")
	code, loc = post(t, c, srv.URL+"/tasks/"+itoa(s.running)+"/delete", url.Values{"csrf_token": {csrfFrom(t, body)}}, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)
	_, body, _ = get(t, c, srv.URL+loc, bearer()...)
	require.Contains(t, body, "is running; only finished tasks are deleted (cancel it first)")
	require.Equal(t, taskorch.StatusRunning, taskStatus(t, pool, s.running))
}

// actorOf returns the actor of the task's latest event of that kind.
func actorOf(t *testing.T, pool *pgxpool.Pool, id int64, event string) string {
	t.Helper()
	var actor string
	require.NoError(t, pool.QueryRow(t.Context(), `select actor from queues.task_event where task_id = $1 and event = $2
		order by task_event_id desc limit 1`, id, event).Scan(&actor))
	return actor
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

func count64(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int64 {
	return int64(count(t, pool, sql, args...))
}
