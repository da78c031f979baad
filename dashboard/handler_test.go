package dashboard_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/dashboard"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// get fetches a page with the bearer token and returns its status and body.
func get(t *testing.T, c *http.Client, u string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Header
}

func bearer() []string { return []string{"Authorization", "Bearer " + testToken} }

var csrfInput = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)

// csrfFrom returns the CSRF token of a page's forms.
func csrfFrom(t *testing.T, body string) string {
	t.Helper()
	m := csrfInput.FindStringSubmatch(body)
	require.NotNil(t, m, "no CSRF token in the page")
	return m[1]
}

// post submits a form and returns the status and the Location header.
func post(t *testing.T, c *http.Client, u string, form url.Values, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, u, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Location")
}

func TestEveryPageRenders(t *testing.T) {
	t.Parallel()
	srv, _, s := newDashboard(t, dashboard.Config{})
	c := browserlessClient(t)
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/", []string{"Throughput and failures", "img.resize", "paused", "seed-worker", "<svg"}},
		{"/tasks", []string{"report.build", "xss.probe", "billing.charge", `data-task-id="` + itoa(s.dead) + `"`}},
		{"/tasks?status=dead", []string{`data-task-id="` + itoa(s.dead) + `"`}},
		{"/tasks/" + itoa(s.dead), []string{"bob@example.com", "Leases", "tl-bad", "running → dead", "smtp: dial"}},
		{"/tasks/" + itoa(s.completed), []string{"completed", "tl-ok"}},
		{"/dead", []string{"Dead tasks", `data-task-id="` + itoa(s.dead) + `"`, "Retry selected"}},
		{"/dead?status=failed", []string{"Failed tasks", `data-task-id="` + itoa(s.failed) + `"`}},
		{"/queues", []string{`data-queue="img.resize"`, "Resume", "Pause"}},
		{"/processes", []string{`data-process="demo.ship_order"`, `data-process="demo.weird&#34;name"`}},
		{"/processes/demo.ship_order", []string{`data-root="` + itoa(s.processRoot) + `"`, "succeeded", "ORD-\u0026lt;i\u0026gt;7"}},
		{"/processes/demo.ship_order/" + itoa(s.processRoot), []string{"carrier timeout", "outcome-failed", "outcome-succeeded",
			`href="/tasks/` + itoa(s.supervisorTask) + `"`, `href="/tasks/` + itoa(s.channelTask) + `"`}},
		{"/processes/" + url.PathEscape(`demo.weird"name`) + "/1", []string{"gave up"}},
		{"/limits", []string{`data-limit="report.build"`, "at most 2 running per report", ">monthly<", `data-limit="sms.alert"`, "1/s (burst 3)"}},
		{"/workers", []string{`data-worker="seed-worker"`, "leader", "seed-host", `href="/tasks/` + itoa(s.running) + `"`}},
		{"/schedules", []string{`data-schedule="nightly-report"`, "0 3 * * *",
			`hourly-digest <span class="muted small" title="declared in a worker's code`}},
		{"/outbox", []string{"ann@example.com", "&#43;15550100", "delivery refused by a rule", "Welcome &lt;b&gt;Ann"}},
	} {
		code, body, _ := get(t, c, srv.URL+tc.path, bearer()...)
		require.Equal(t, http.StatusOK, code, "%s: %s", tc.path, body)
		for _, w := range tc.want {
			require.Contains(t, body, w, tc.path)
		}
	}
	// A table that merely ends in _task is not a process.
	_, body, _ := get(t, c, srv.URL+"/processes", bearer()...)
	require.NotContains(t, body, "just_a")
	// The task detail links the process instance the payload names.
	for _, id := range []int64{s.supervisorTask, s.channelTask} {
		_, body, _ := get(t, c, srv.URL+"/tasks/"+itoa(id), bearer()...)
		require.Contains(t, body, `href="/processes/demo.ship_order/`+itoa(s.processRoot)+`"`)
	}
	// A live refresh gets the content only.
	code, body, _ := get(t, c, srv.URL+"/tasks", append(bearer(), "X-Taskorch-Fragment", "1")...)
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, "<html")
	require.Contains(t, body, "report.build")
	// Unknown things are 404s.
	for _, p := range []string{"/tasks/999999", "/tasks/abc", "/processes/demo.nope", "/processes/demo.ship_order/999", "/nope"} {
		code, _, _ := get(t, c, srv.URL+p, bearer()...)
		require.Equal(t, http.StatusNotFound, code, p)
	}
	code, _, _ = get(t, c, srv.URL+"/tasks?status=bogus", bearer()...)
	require.Equal(t, http.StatusBadRequest, code)
}

func TestTasksFilterFindAndPage(t *testing.T) {
	t.Parallel()
	srv, pool, s := newDashboard(t, dashboard.Config{})
	c := browserlessClient(t)
	ids := regexp.MustCompile(`data-task-id="(\d+)"`)
	list := func(query string) []string {
		code, body, _ := get(t, c, srv.URL+"/tasks?"+query, bearer()...)
		require.Equal(t, http.StatusOK, code, body)
		var out []string
		for _, m := range ids.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	require.Equal(t, []string{itoa(s.dead)}, list("status=dead&type=email.welcome"))
	require.Equal(t, []string{itoa(s.failed)}, list("type=email.welcome&status=failed"))
	require.ElementsMatch(t, []string{itoa(s.failed), itoa(s.dead)}, list("type=email.welcome"))
	require.Equal(t, []string{itoa(s.keyed)}, list("key=report-2025-11"))
	require.Empty(t, list("from=2100-01-01T00:00"))
	require.Len(t, list("to=2100-01-01T00:00&type=report.build"), 6)

	// Find: an id opens the task; a unique idempotency key too.
	code, loc := getRedirect(t, c, srv.URL+"/tasks?q="+itoa(s.running))
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/tasks/"+itoa(s.running), loc)
	_, loc = getRedirect(t, c, srv.URL+"/tasks?q=report-2025-11")
	require.Equal(t, "/tasks/"+itoa(s.keyed), loc)

	// Keyset paging: 40 more tasks, pages of 25 forwards then backwards give every task once.
	_, err := pool.Exec(t.Context(), `select queues.enqueue_many(array_fill('bulk.page'::text, array[40]),
		array(select jsonb_build_object('i', i) from generate_series(1, 40) i))`)
	require.NoError(t, err)
	var pages [][]string
	next := "type=bulk.page&limit=25"
	for next != "" {
		code, body, _ := get(t, c, srv.URL+"/tasks?"+next, bearer()...)
		require.Equal(t, http.StatusOK, code)
		var page []string
		for _, m := range ids.FindAllStringSubmatch(body, -1) {
			page = append(page, m[1])
		}
		pages = append(pages, page)
		next = ""
		if m := regexp.MustCompile(`href="/tasks\?([^"]*before=\d+[^"]*)" rel="next"`).FindStringSubmatch(body); m != nil {
			next = strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	require.Len(t, pages, 2)
	require.Len(t, pages[0], 25)
	require.Len(t, pages[1], 15)
	all := append(append([]string{}, pages[0]...), pages[1]...)
	seen := map[string]bool{}
	for i, id := range all {
		require.False(t, seen[id])
		seen[id] = true
		if i > 0 {
			a, _ := strconv.ParseInt(all[i-1], 10, 64)
			b, _ := strconv.ParseInt(id, 10, 64)
			require.Greater(t, a, b, "newest first")
		}
	}
	// Back from the last page: the newer page is the first one again.
	newer := list("type=bulk.page&limit=25&after=" + pages[1][0])
	require.Equal(t, pages[0], newer)
}

func getRedirect(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

func TestActionsNeedAuthAndCSRF(t *testing.T) {
	t.Parallel()
	srv, pool, s := newDashboard(t, dashboard.Config{})
	c := browserlessClient(t)
	retry := srv.URL + "/tasks/" + itoa(s.dead) + "/retry"
	cancel := srv.URL + "/tasks/" + itoa(s.pending) + "/cancel"

	// No authentication: 401, nothing changes.
	code, _ := post(t, c, retry, url.Values{})
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = post(t, c, cancel, url.Values{})
	require.Equal(t, http.StatusUnauthorized, code)
	// A wrong token is no token.
	code, _ = post(t, c, retry, url.Values{}, "Authorization", "Bearer wrong-token-0123456789")
	require.Equal(t, http.StatusUnauthorized, code)

	// Authenticated, but no CSRF cookie or token: 403.
	code, _ = post(t, c, retry, url.Values{}, bearer()...)
	require.Equal(t, http.StatusForbidden, code)

	// Get a CSRF cookie and token from a page.
	_, body, _ := get(t, c, srv.URL+"/tasks/"+itoa(s.dead), bearer()...)
	token := csrfFrom(t, body)
	// A token that does not match the cookie: 403.
	code, _ = post(t, c, retry, url.Values{"csrf_token": {token + "x"}}, bearer()...)
	require.Equal(t, http.StatusForbidden, code)
	// The right token without authentication: 401.
	code, _ = post(t, c, retry, url.Values{"csrf_token": {token}})
	require.Equal(t, http.StatusUnauthorized, code)
	// The right token from another origin (a browser says so): 403.
	code, _ = post(t, c, retry, url.Values{"csrf_token": {token}}, append(bearer(), "Origin", "https://evil.example")...)
	require.Equal(t, http.StatusForbidden, code)
	code, _ = post(t, c, retry, url.Values{"csrf_token": {token}}, append(bearer(), "Sec-Fetch-Site", "cross-site")...)
	require.Equal(t, http.StatusForbidden, code)
	// A token from another client's cookie does not work with this one's.
	other := browserlessClient(t)
	_, body2, _ := get(t, other, srv.URL+"/", bearer()...)
	code, _ = post(t, c, retry, url.Values{"csrf_token": {csrfFrom(t, body2)}}, bearer()...)
	require.Equal(t, http.StatusForbidden, code)

	require.Equal(t, taskorch.StatusDead, taskStatus(t, pool, s.dead), "refused requests changed nothing")
	require.Equal(t, taskorch.StatusPending, taskStatus(t, pool, s.pending))

	// Auth and CSRF: done, back to the page with a message.
	code, loc := post(t, c, retry, url.Values{"csrf_token": {token}, "return_to": {"/tasks/" + itoa(s.dead)}}, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/tasks/"+itoa(s.dead), loc)
	require.Equal(t, taskorch.StatusPending, taskStatus(t, pool, s.dead))
	_, body, _ = get(t, c, srv.URL+loc, bearer()...)
	require.Contains(t, body, "Retried task "+itoa(s.dead))

	// The token in a header works too; a return_to elsewhere is ignored.
	code, loc = post(t, c, cancel, url.Values{"return_to": {"https://evil.example/"}}, append(bearer(), "X-CSRF-Token", token)...)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/tasks/"+itoa(s.pending), loc)
	require.Equal(t, taskorch.StatusCancelled, taskStatus(t, pool, s.pending))

	// Bulk: one retried, one refused (completed), reported.
	code, _ = post(t, c, srv.URL+"/tasks/retry", url.Values{"csrf_token": {token}, "id": {itoa(s.failed), itoa(s.completed)}}, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, taskorch.StatusPending, taskStatus(t, pool, s.failed))
	require.Equal(t, taskorch.StatusCompleted, taskStatus(t, pool, s.completed))
	_, body, _ = get(t, c, srv.URL+"/dead", bearer()...)
	require.Contains(t, body, "Retried task "+itoa(s.failed)+". Refused: task "+itoa(s.completed)+" is already completed")

	// Pause and resume.
	code, _ = post(t, c, srv.URL+"/queues/report.build/pause", url.Values{"csrf_token": {token}}, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)
	tc, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	paused, err := tc.PausedQueues(t.Context())
	require.NoError(t, err)
	require.Len(t, paused, 2)
	require.Equal(t, "dashboard:token", paused[1].PausedBy, "the actor: the token's name")
	code, _ = post(t, c, srv.URL+"/queues/img.resize/resume", url.Values{"csrf_token": {token}}, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)
	paused, err = tc.PausedQueues(t.Context())
	require.NoError(t, err)
	require.Len(t, paused, 1)
	require.Equal(t, "report.build", paused[0].TaskType)
	// A GET does nothing.
	code, _, _ = get(t, c, srv.URL+"/tasks/"+itoa(s.running)+"/cancel", bearer()...)
	require.Contains(t, []int{http.StatusNotFound, http.StatusMethodNotAllowed}, code)
	require.Equal(t, taskorch.StatusRunning, taskStatus(t, pool, s.running))
}

func TestPagesNeedAuthentication(t *testing.T) {
	t.Parallel()
	srv, _, s := newDashboard(t, dashboard.Config{})
	c := browserlessClient(t)
	for _, p := range []string{"/", "/tasks", "/tasks/" + itoa(s.secret), "/workers", "/outbox", "/processes", "/nope"} {
		code, body, _ := get(t, c, srv.URL+p)
		require.Equal(t, http.StatusUnauthorized, code, p)
		require.Contains(t, body, `name="token"`, "the sign-in form")
		require.NotContains(t, body, "billing.charge")
	}
	code, _, _ := get(t, c, srv.URL+"/tasks", "X-Taskorch-Fragment", "1")
	require.Equal(t, http.StatusUnauthorized, code)
	// Assets are public (they hold nothing).
	code, _, hdr := get(t, c, srv.URL+"/static/app.js")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, hdr.Get("Content-Type"), "javascript")

	// Sign in with the token: a session cookie.
	_, body, _ := get(t, c, srv.URL+"/login?next=/workers")
	token := csrfFrom(t, body)
	code, _ = post(t, c, srv.URL+"/login", url.Values{"csrf_token": {token}, "token": {"nope-nope-nope-nope"}, "next": {"/workers"}})
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = post(t, c, srv.URL+"/login", url.Values{"token": {testToken}, "next": {"/workers"}})
	require.Equal(t, http.StatusForbidden, code, "sign-in needs the CSRF token too")
	code, loc := post(t, c, srv.URL+"/login", url.Values{"csrf_token": {token}, "token": {testToken}, "next": {"//evil.example/x"}})
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/", loc, "no redirect outside the dashboard")
	code, body, _ = get(t, c, srv.URL+"/tasks/"+itoa(s.secret))
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "sign out")
	// The session can act (with the CSRF token).
	code, _ = post(t, c, srv.URL+"/tasks/"+itoa(s.secret)+"/cancel", url.Values{"csrf_token": {csrfFrom(t, body)}})
	require.Equal(t, http.StatusSeeOther, code)
	// Sign out.
	code, _ = post(t, c, srv.URL+"/logout", url.Values{"csrf_token": {csrfFrom(t, body)}})
	require.Equal(t, http.StatusSeeOther, code)
	code, _, _ = get(t, c, srv.URL+"/tasks")
	require.Equal(t, http.StatusUnauthorized, code)
}

func TestBasicAuthAndPublicRead(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	s := seed(t, pool)
	h, err := dashboard.New(pool, dashboard.Config{Username: "ops", Password: "correct horse battery", PublicRead: true})
	require.NoError(t, err)
	srv := newServer(t, h)
	c := browserlessClient(t)
	// Pages are public, without action buttons.
	code, body, _ := get(t, c, srv.URL+"/tasks/"+itoa(s.dead))
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, `id="retry"`)
	token := csrfFrom(t, body)
	// Actions need the basic auth credentials: a challenge without them.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/tasks/"+itoa(s.dead)+"/retry",
		strings.NewReader(url.Values{"csrf_token": {token}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Basic")
	require.Equal(t, taskorch.StatusDead, taskStatus(t, pool, s.dead))
	// With them.
	req, err = http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/tasks/"+itoa(s.dead)+"/retry",
		strings.NewReader(url.Values{"csrf_token": {token}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("ops", "correct horse battery")
	resp, err = c.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, taskorch.StatusPending, taskStatus(t, pool, s.dead))
}

func TestReadOnly(t *testing.T) {
	t.Parallel()
	srv, pool, s := newDashboard(t, dashboard.Config{ReadOnly: true})
	c := browserlessClient(t)
	// No credentials configured: pages are open, without buttons.
	code, body, _ := get(t, c, srv.URL+"/dead")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "read-only")
	require.NotContains(t, body, "Retry selected")
	_, body, _ = get(t, c, srv.URL+"/tasks/"+itoa(s.dead))
	require.NotContains(t, body, `id="retry"`)
	code, _ = post(t, c, srv.URL+"/tasks/"+itoa(s.dead)+"/retry", url.Values{"csrf_token": {csrfFrom(t, body)}})
	require.Equal(t, http.StatusForbidden, code)
	require.Equal(t, taskorch.StatusDead, taskStatus(t, pool, s.dead))

	// Read-only with a token: pages need it, actions are still refused.
	h, err := dashboard.New(pool, dashboard.Config{ReadOnly: true, Token: testToken})
	require.NoError(t, err)
	srv2 := newServer(t, h)
	code, _, _ = get(t, c, srv2.URL+"/")
	require.Equal(t, http.StatusUnauthorized, code)
	_, body, _ = get(t, c, srv2.URL+"/", bearer()...)
	code, _ = post(t, c, srv2.URL+"/tasks/"+itoa(s.dead)+"/retry", url.Values{"csrf_token": {csrfFrom(t, body)}}, bearer()...)
	require.Equal(t, http.StatusForbidden, code)
	require.Equal(t, taskorch.StatusDead, taskStatus(t, pool, s.dead))
}

func TestEscapingSecretsAndHeaders(t *testing.T) {
	t.Parallel()
	// The pool's URL carries a password (the test server may not check it): no page shows it.
	seededPool := dbtest.NewDB(t)
	s := seed(t, seededPool)
	pcfg := seededPool.Config().Copy()
	pcfg.ConnConfig.Password = "pw-that-must-not-show"
	pool, err := pgxpool.NewWithConfig(t.Context(), pcfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	h, err := dashboard.New(pool, dashboard.Config{Token: testToken})
	require.NoError(t, err)
	srv := newServer(t, h)
	c := browserlessClient(t)
	for _, p := range []string{"/tasks/" + itoa(s.xss), "/tasks?type=xss.probe", "/dead"} {
		code, body, hdr := get(t, c, srv.URL+p, bearer()...)
		require.Equal(t, http.StatusOK, code)
		require.NotContains(t, body, "<script>alert", p)
		require.NotContains(t, body, "<img src=x", p)
		require.Contains(t, body, "&lt;script&gt;alert(&#34;xss&#34;)&lt;/script&gt;", p)
		require.Equal(t, "DENY", hdr.Get("X-Frame-Options"))
		require.Equal(t, "nosniff", hdr.Get("X-Content-Type-Options"))
		csp := hdr.Get("Content-Security-Policy")
		require.Contains(t, csp, "script-src 'self'")
		require.Contains(t, csp, "frame-ancestors 'none'")
		require.NotContains(t, csp, "unsafe-inline")
		require.Equal(t, "no-store", hdr.Get("Cache-Control"))
	}
	// Secrets: the payload's api_key and password are masked, the error's password too, and the
	// database is named without its password.
	_, body, _ := get(t, c, srv.URL+"/tasks/"+itoa(s.secret), bearer()...)
	require.NotContains(t, body, "sk_live_SUPERSECRET")
	require.NotContains(t, body, "hunter2")
	require.Contains(t, body, "cus_42")
	require.Contains(t, body, `&#34;xxxxx&#34;`)
	_, body, _ = get(t, c, srv.URL+"/tasks/"+itoa(s.dead), bearer()...)
	require.NotContains(t, body, "hunter2")
	require.Contains(t, body, "postgres://mailer:xxxxx@db:5432/x")
	cfg := pool.Config().ConnConfig
	for _, p := range []string{"/", "/workers", "/tasks"} {
		_, body, _ := get(t, c, srv.URL+p, bearer()...)
		require.NotContains(t, body, cfg.Password, p)
		require.Contains(t, body, cfg.User+"@"+cfg.Host)
	}
	// The cookies are HttpOnly and SameSite=Strict.
	_, _, hdr := get(t, browserlessClient(t), srv.URL+"/", bearer()...)
	for _, sc := range hdr.Values("Set-Cookie") {
		require.Contains(t, sc, "HttpOnly")
		require.Contains(t, sc, "SameSite=Strict")
	}
}

func TestMountedUnderPrefix(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	s := seed(t, pool)
	h, err := dashboard.New(pool, dashboard.Config{Prefix: "/ops/taskorch/", Token: testToken})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ops/taskorch/", h)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "the app") })
	srv := newServer(t, mux)
	c := browserlessClient(t)
	code, body, _ := get(t, c, srv.URL+"/ops/taskorch/tasks/"+itoa(s.dead), bearer()...)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `href="/ops/taskorch/static/app.css`)
	require.Contains(t, body, `action="/ops/taskorch/tasks/`+itoa(s.dead)+`/retry"`)
	code, loc := post(t, c, srv.URL+"/ops/taskorch/tasks/"+itoa(s.dead)+"/retry", url.Values{"csrf_token": {csrfFrom(t, body)}}, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/ops/taskorch/tasks/"+itoa(s.dead), loc)
	code, loc = getRedirect(t, c, srv.URL+"/ops/taskorch")
	require.Contains(t, []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect}, code)
	require.Equal(t, "/ops/taskorch/", loc)
	_, body, _ = get(t, c, srv.URL+"/elsewhere")
	require.Equal(t, "the app", body)
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	for _, cfg := range []dashboard.Config{
		{},                                 // anyone could act
		{Token: "short"},                   // guessable
		{Username: "ops"},                  // no password
		{Token: testToken, Prefix: "nope"}, // not a path
		{Token: testToken, SecretKey: []byte("short")},
		{Tokens: map[string]string{"ann": "short"}},                              // guessable
		{Tokens: map[string]string{"ann bee": testToken}},                        // a space in the name
		{Tokens: map[string]string{"": testToken}},                               // no name
		{Tokens: map[string]string{"ann": testToken, "bob": testToken}},          // one token, two names
		{Token: testToken, Tokens: map[string]string{"token": testToken + "-2"}}, // Token's holder's name
	} {
		_, err := dashboard.New(pool, cfg)
		require.Error(t, err, "%+v", cfg)
	}
	_, err := dashboard.New(nil, dashboard.Config{ReadOnly: true})
	require.Error(t, err)
	require.Len(t, dashboard.NewToken(), 43)
	require.NotEqual(t, dashboard.NewToken(), dashboard.NewToken())
}

// The overview's charts count completions from the tasks' rows (a completion writes no event),
// a completion whose channel call failed as a failed attempt, and retries from the events.
func TestOverviewChartsCountCompletions(t *testing.T) {
	t.Parallel()
	srv, pool, _ := newDashboard(t, dashboard.Config{})
	c := browserlessClient(t)
	totals := func() (completed, failed int64) {
		t.Helper()
		_, body, _ := get(t, c, srv.URL+"/", bearer()...)
		m := regexp.MustCompile(`(Completed|Failed attempts) <span class="muted">· ([0-9,]+) in the window`).FindAllStringSubmatch(body, -1)
		require.Len(t, m, 2, body)
		n := func(s string) int64 {
			v, err := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
			require.NoError(t, err)
			return v
		}
		return n(m[0][2]), n(m[1][2])
	}
	completed0, failed0 := totals()

	ctx := t.Context()
	_, err := pool.Exec(ctx, `select queues.enqueue('chart.probe', jsonb_build_object('i', i)) from generate_series(1, 7) i`)
	require.NoError(t, err)
	rows, err := pool.Query(ctx, `select task_id, lease_id from queues.claim_tasks('chart-worker', 7, interval '5 minutes', array['chart.probe']) order by task_id`)
	require.NoError(t, err)
	type leased struct{ ID, Lease int64 }
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[leased])
	require.NoError(t, err)
	require.Len(t, got, 7)
	for _, l := range got[:5] {
		_, err = pool.Exec(ctx, `select queues.complete_tasks(array[$1::bigint], array[$2::bigint])`, l.ID, l.Lease)
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, `select queues.complete_failed_call($1, $2, 'provider_error', 'smtp: 550')`, got[5].ID, got[5].Lease)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `select queues.fail_task($1, 'boom', $2)`, got[6].ID, got[6].Lease) // retried later
	require.NoError(t, err)

	completed1, failed1 := totals()
	require.Equal(t, completed0+5, completed1, "five completions")
	require.Equal(t, failed0+2, failed1, "a failed call and a scheduled retry")
}
