package browser_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/dashboard"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// The browser tests drive Debian's headless chromium through the DevTools protocol (chromedp):
// real pages, real JavaScript, real cookies. Each test has a browser of its own, with a fresh
// profile, and at most two run at once (the CI machine has two cores).

// screenshotDir keeps each page's screenshot as a test artifact (gitignored).
const screenshotDir = "../../artifacts/screenshots"

var browserSlots = make(chan struct{}, 2)

// chromiumPath finds the browser or fails the test saying how to install it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("the dashboard's browser tests need chromium: run scripts/install-deps.sh as root (apt-get install chromium)")
	return ""
}

// browser is a headless chromium tab of a test.
type browser struct {
	t       *testing.T
	ctx     context.Context
	mu      sync.Mutex
	dialogs []string // every JavaScript dialog that opened (accepted)
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	bin := chromiumPath(t)
	browserSlots <- struct{}{}
	t.Cleanup(func() { <-browserSlots })
	// The allocator and the browser live as long as the test; no timeout on their context.
	// Chromium's own temporary folders (org.chromium.Chromium.*, left behind when the browser is
	// killed) go under the test's TMPDIR, which the test removes, as does the profile.
	actx, cancelAlloc := chromedp.NewExecAllocator(context.WithoutCancel(t.Context()),
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Env("TMPDIR="+t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.WindowSize(1360, 900),
	)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	b := &browser{t: t, ctx: ctx}
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")), "start chromium")
	// Accept every dialog (our confirmations) and remember it: the XSS test wants none.
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.dialogs = append(b.dialogs, ev.Message)
			b.mu.Unlock()
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return b
}

// do runs steps with a timeout.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, steps...))
}

// click clicks the first element matching the CSS selector as a user's click does: a link
// opens, a submit button submits its form (asking its confirmation first), a box toggles. It
// marks the document stale first (body[data-stale]), so a wait after a click that navigates can
// skip the old page with body:not([data-stale]).
//
// It runs in the page, in one step. The live refresh replaces the page's content every few
// hundred milliseconds, and chromedp.Click, which finds a node and then clicks it by its
// DevTools id, fails ("Could not find node with given id") when a refresh lands in between.
func click(sel string) chromedp.Action[chromedp.Void] {
	q := strconv.Quote(sel)
	return chromedp.Evaluate[chromedp.Void](`(() => {
		const e = document.querySelector(` + q + `);
		if (!e) { throw new Error('nothing matches ' + ` + q + `); }
		document.body.dataset.stale = '1';
		e.click();
	})()`)
}

// text returns the visible text of the first element matching the CSS selector, once one is
// visible. It finds and reads the element in one step inside the page: a live refresh may
// replace the page's nodes at any time, so a node found in one call may be gone in the next.
func (b *browser) text(sel string) string {
	b.t.Helper()
	q := strconv.Quote(sel)
	return eval[string](b, `new Promise((resolve, reject) => {
		const start = Date.now();
		(function poll() {
			const e = document.querySelector(`+q+`);
			if (e && e.offsetParent !== null) { return resolve(e.innerText); }
			if (Date.now() - start > 25000) { return reject(new Error('nothing visible matches ' + `+q+`)); }
			setTimeout(poll, 20);
		})();
	})`)
}

// eval runs JavaScript in the page and decodes its value (awaiting a promise).
func eval[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	require.NoError(b.t, err, js)
	return v
}

// screenshot saves the page as artifacts/screenshots/<name>.png.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(b.t, err)
	require.NoError(b.t, os.MkdirAll(screenshotDir, 0o755))
	require.NoError(b.t, os.WriteFile(filepath.Join(screenshotDir, name+".png"), png, 0o644)) //nolint:gosec // a test artifact
}

func (b *browser) dialogCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.dialogs)
}

// signIn signs in on the dashboard's page with the token.
func (b *browser) signIn(base string) {
	b.t.Helper()
	b.do(
		chromedp.Navigate(base+"/login"),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), testToken),
		chromedp.Submit(chromedp.CSS(`input[name=token]`)),
		chromedp.WaitVisible(chromedp.CSS(`form[action$="/logout"]`)),
	)
}

// browserDashboard serves a seeded dashboard with a fast live refresh.
func browserDashboard(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	h, err := dashboard.New(pool, dashboard.Config{Token: testToken, RefreshInterval: 400 * time.Millisecond})
	require.NoError(t, err)
	return newServer(t, h).URL
}

// TestBrowserEveryPage opens every page in chromium with seeded data, signs in on the way,
// and keeps a screenshot of each.
func TestBrowserEveryPage(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	seedChartHistory(t, pool) // first: its tasks are older than the seed's, off the task list's first page
	s := seed(t, pool)
	base := browserDashboard(t, pool)
	b := newBrowser(t)

	// Not signed in: the sign-in page.
	b.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)))
	b.screenshot("login")
	b.signIn(base)

	for _, p := range []struct {
		name, path, wait, want string
	}{
		{"overview", "/", `.chart rect.bar`, "Throughput and failures"},
		{"tasks", "/tasks", `tr[data-task-id]`, "report.build"},
		{"task", "/tasks/" + itoa(s.dead), `svg.timeline rect`, "bob@example.com"},
		{"dead", "/dead", `tr[data-task-id="` + itoa(s.dead) + `"]`, "Dead tasks"},
		{"queues", "/queues", `tr[data-queue="img.resize"]`, "paused"},
		{"processes", "/processes", `tr[data-process="demo.ship_order"]`, "demo.ship_order"},
		{"process", "/processes/demo.ship_order", `tr[data-root]`, "succeeded"},
		{"process_instance", "/processes/demo.ship_order/" + itoa(s.processRoot), `tr.outcome-failed`, "carrier timeout"},
		{"limits", "/limits", `tr[data-limit="report.build"]`, "at most 2 running per report"},
		{"workers", "/workers", `tr[data-worker="seed-worker"]`, "seed-host"},
		{"schedules", "/schedules", `tr[data-schedule="nightly-report"]`, "0 3 * * *"},
		{"outbox", "/outbox", `tr[data-message]`, "ann@example.com"},
	} {
		b.do(chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS(p.wait)))
		require.Contains(t, b.text("#content"), p.want, p.path)
		b.screenshot(p.name)
	}
	// The process instance shows 2 attempts: 1 failed, 1 succeeded.
	b.do(chromedp.Navigate(base + "/processes/demo.ship_order/" + itoa(s.processRoot)))
	require.Equal(t, 2, eval[int](b, `document.querySelectorAll('tr[data-attempt]').length`))
	require.Equal(t, 1, eval[int](b, `document.querySelectorAll('tr.outcome-failed').length`))
	require.Equal(t, 1, eval[int](b, `document.querySelectorAll('tr.outcome-succeeded').length`))
	require.Zero(t, b.dialogCount())
}

// seedChartHistory adds an hour of completed tasks and failed attempts (retry_scheduled events),
// so that the overview's charts have a shape (the README's picture comes from the demo: make
// screenshots).
func seedChartHistory(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(t.Context(), `
		with s as (
		    select now() - make_interval(mins => m) + make_interval(secs => i % 60) as at, i % (17 + m % 5) = 0 as failed
		    from generate_series(1, 59) m,
		         generate_series(1, 40 + (30 * sin(m / 6.0))::int + (m * 7) % 23) i
		), ev as (
		    insert into queues.task_event (task_id, occurred_at, event, from_status, to_status)
		    select 0, at, 'retry_scheduled', 'running', 'pending' from s where failed
		)
		insert into queues.task (task_type, status, attempt, enqueued_at, scheduled_at, run_at, claimed_at, completed_at)
		select 'chart.history', 'completed', 1, at, at, at, at, at from s where not failed`)
	require.NoError(t, err)
}

// TestBrowserFilterAndOpenTask filters the task list with the form and opens a task.
func TestBrowserFilterAndOpenTask(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	s := seed(t, pool)
	base := browserDashboard(t, pool)
	b := newBrowser(t)
	b.signIn(base)

	b.do(
		chromedp.Navigate(base+"/tasks"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-task-id]`)),
		// Fill and submit the form in one step: under load, a live refresh of the page between
		// separate steps could replace the form and lose a value already set.
		chromedp.Evaluate[chromedp.Void](`(() => {
			document.body.dataset.stale = '1';
			const f = document.querySelector('input[name=type]').form;
			f.querySelector('select[name=status]').value = 'dead';
			f.querySelector('input[name=type]').value = 'email.welcome';
			f.requestSubmit();
		})()`),
		// Wait for the filtered page itself: the unfiltered list already shows the dead
		// task's row, so the old document is marked and the wait skips it.
		chromedp.WaitVisible(chromedp.CSS(`body:not([data-stale]) tr[data-task-id="`+itoa(s.dead)+`"]`)),
	)
	rows := eval[[]string](b, `Array.from(document.querySelectorAll('tr[data-task-id]')).map(r => r.dataset.taskId)`)
	require.Equal(t, []string{itoa(s.dead)}, rows)
	require.Contains(t, eval[string](b, `location.search`), "status=dead")
	b.screenshot("tasks_filtered")

	// Find by idempotency key from the header's search box: it opens the task.
	b.do(
		chromedp.SendKeys(chromedp.CSS(`header input[name=q]`), "report-2025-11\n"),
		chromedp.WaitVisible(chromedp.CSS(`h1 .type`)),
	)
	require.Contains(t, b.text("h1"), "Task "+itoa(s.keyed))

	// Open a task from the list.
	b.do(
		chromedp.Navigate(base+"/tasks?type=billing.charge"),
		click(`tr[data-task-id="`+itoa(s.secret)+`"] a[href$="/tasks/`+itoa(s.secret)+`"]`),
		chromedp.WaitVisible(chromedp.CSS(`pre.json`)),
	)
	payload := b.text("pre.json")
	require.Contains(t, payload, `"customer": "cus_42"`)
	require.NotContains(t, payload, "sk_live_SUPERSECRET")
	require.Contains(t, b.text("h1"), "Task "+itoa(s.secret))
}

// flakyArgs is the payload of the task the retry test makes dead, then completes.
type flakyArgs struct {
	N int `json:"n"`
}

func (flakyArgs) TaskType() string { return "flaky.job" }

// TestBrowserRetryDeadTaskCompletes runs a real worker whose handler fails until told
// otherwise: its tasks go dead, an operator retries them in the browser (one from its page,
// two at once from the dead page), and the pages show them complete without a reload.
func TestBrowserRetryDeadTaskCompletes(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 12})
	retryDeadTaskCompletes(t, pool, nil)
}

// TestBrowserRetryDeadTaskCompletesOnReplica is the same with the dashboard reading from a
// streaming standby (Config.ReadPool): the retries go to the primary, and the pages see their
// outcome once the replica has replayed it.
func TestBrowserRetryDeadTaskCompletesOnReplica(t *testing.T) {
	t.Parallel()
	primary, replica, _ := replicatedDB(t)
	retryDeadTaskCompletes(t, primary, replica)
}

// retryDeadTaskCompletes: see TestBrowserRetryDeadTaskCompletes. readPool, when not nil, is the
// dashboard's Config.ReadPool.
func retryDeadTaskCompletes(t *testing.T, pool, readPool *pgxpool.Pool) {
	seed(t, pool)
	var healthy atomic.Bool
	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(_ context.Context, _ *taskorch.TaskFor[flakyArgs]) error {
		if !healthy.Load() {
			return errors.New("downstream is down")
		}
		return nil
	})
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		Handlers: hs, Concurrency: 2, PollInterval: 20 * time.Millisecond,
		MaxPollInterval: 200 * time.Millisecond, ID: "browser-test-worker",
	})
	require.NoError(t, err)
	wctx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(wctx) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-stopped)
	})

	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	var ids []int64
	for i := range 3 {
		res, err := c.Enqueue(t.Context(), flakyArgs{N: i}, &taskorch.EnqueueOpts{MaxAttempts: 1})
		require.NoError(t, err)
		ids = append(ids, res.TaskID)
	}
	require.Eventually(t, func() bool {
		for _, id := range ids {
			if taskStatus(t, pool, id) != taskorch.StatusDead {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "the worker makes the tasks dead")
	healthy.Store(true)

	h, err := dashboard.New(pool, dashboard.Config{Token: testToken, RefreshInterval: 400 * time.Millisecond, ReadPool: readPool})
	require.NoError(t, err)
	base := newServer(t, h).URL
	b := newBrowser(t)
	b.signIn(base)
	shot := func(name string) { // the screenshots are the primary's run
		if readPool == nil {
			b.screenshot(name)
		}
	}
	if readPool != nil {
		b.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#replica-lag`)))
		require.Contains(t, b.text("#replica-lag"), "Reading from a replica")
	}

	// One from its page. The page then refreshes itself until the task is completed; the
	// marker set on the window before shows there was no reload.
	b.do(
		chromedp.Navigate(base+"/tasks/"+itoa(ids[0])),
		chromedp.WaitVisible(chromedp.CSS(`h1 .st-dead`)),
		click(`#retry`),
		chromedp.WaitVisible(chromedp.CSS(`#flash`)),
	)
	require.Contains(t, b.text("#flash"), "Retried task "+itoa(ids[0]))
	eval[chromedp.Void](b, `window.__noReload = 'still here'`)
	b.do(chromedp.WaitVisible(chromedp.CSS(`h1 .st-completed`)))
	require.Equal(t, "still here", eval[string](b, `window.__noReload`), "live refresh, not a reload")
	require.Equal(t, taskorch.StatusCompleted, taskStatus(t, pool, ids[0]))
	shot("task_completed_after_retry")

	// Two at once from the dead page: tick them, retry, confirm.
	b.do(
		chromedp.Navigate(base+"/dead?type=flaky.job"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-task-id="`+itoa(ids[2])+`"]`)),
		click(`input[name=id][value="`+itoa(ids[1])+`"]`),
		click(`input[name=id][value="`+itoa(ids[2])+`"]`),
	)
	require.Equal(t, "2 selected", b.text("[data-selected-count]"))
	shot("dead_selected")
	b.do(
		click(`button[formaction$="/tasks/retry"]`),
		chromedp.WaitVisible(chromedp.CSS(`#flash`)),
	)
	require.Contains(t, b.text("#flash"), "Retried 2 tasks")
	require.Equal(t, 1, b.dialogCount(), "the bulk retry asked for confirmation")
	// The dead page empties itself as the worker completes them.
	b.do(chromedp.WaitVisible(chromedp.CSS(`td.empty`)))
	for _, id := range ids[1:] {
		require.Eventually(t, func() bool { return taskStatus(t, pool, id) == taskorch.StatusCompleted },
			30*time.Second, 20*time.Millisecond)
	}
}

// TestBrowserCancelPending cancels a pending task from its page.
func TestBrowserCancelPending(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	s := seed(t, pool)
	base := browserDashboard(t, pool)
	b := newBrowser(t)
	b.signIn(base)
	b.do(
		chromedp.Navigate(base+"/tasks/"+itoa(s.pending)),
		chromedp.WaitVisible(chromedp.CSS(`h1 .st-pending`)),
		click(`#cancel`),
		chromedp.WaitVisible(chromedp.CSS(`#flash`)),
		chromedp.WaitVisible(chromedp.CSS(`h1 .st-cancelled`)),
	)
	require.Contains(t, b.text("#flash"), "Cancelled task "+itoa(s.pending))
	require.Equal(t, 1, b.dialogCount(), "cancel asked for confirmation")
	require.Equal(t, taskorch.StatusCancelled, taskStatus(t, pool, s.pending))
	// A cancelled task offers retry, not cancel.
	require.Zero(t, eval[int](b, `document.querySelectorAll('#cancel').length`))
	require.Equal(t, 1, eval[int](b, `document.querySelectorAll('#retry').length`))
}

// TestBrowserXSSInert shows a payload and an error made to inject script: they are text, no
// script runs and no dialog opens.
func TestBrowserXSSInert(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	s := seed(t, pool)
	base := browserDashboard(t, pool)
	b := newBrowser(t)
	b.signIn(base)
	eval[chromedp.Void](b, `window.__alerts = 0`)
	for _, p := range []string{"/tasks/" + itoa(s.xss), "/tasks?type=xss.probe", "/dead"} {
		b.do(chromedp.Navigate(base+p), chromedp.WaitVisible(chromedp.CSS(`main h1`)))
		// Anything injected would be an element; there is none.
		require.Zero(t, eval[int](b, `document.querySelectorAll('main script, main img, main [onerror]').length`), p)
		require.Contains(t, b.text("#content"), `<script>alert("xss")</script>`, p)
	}
	b.do(chromedp.Navigate(base+"/tasks/"+itoa(s.xss)), chromedp.WaitVisible(chromedp.CSS(`pre.json`)))
	require.Contains(t, b.text("pre.json"), `"note": "<script>alert(\"xss\")</script><img src=x onerror=\"alert('img')\">"`)
	b.screenshot("xss_inert")
	// Let a live refresh happen too: it inserts the server's markup; still nothing runs.
	refreshed := eval[bool](b, `new Promise(r => document.addEventListener('taskorch:refreshed', () => r(true), {once: true}))`)
	require.True(t, refreshed)
	require.Zero(t, eval[int](b, `document.querySelectorAll('main script, main img').length`))
	require.Zero(t, b.dialogCount(), "no dialog opened")
}

// TestBrowserForgedPostsRefused makes a browser send state-changing requests the way an attack
// would: without signing in, and signed in but from another origin's page (a form that posts
// to the dashboard) or without the CSRF token. Each is refused and nothing changes.
func TestBrowserForgedPostsRefused(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	s := seed(t, pool)
	base := browserDashboard(t, pool)
	retryURL := base + "/tasks/" + itoa(s.dead) + "/retry"
	evil := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><form id="f" method="post" action="` + retryURL + `">
			<input name="csrf_token" value="guessed"><input name="return_to" value="/"></form>
			<script>document.getElementById('f').submit()</script>`))
	}))
	b := newBrowser(t)

	// Not signed in: a POST from the dashboard's own origin is refused (401).
	b.do(chromedp.Navigate(base + "/login"))
	status := eval[int](b, `fetch('`+retryURL+`', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'},
		body: 'csrf_token=' + encodeURIComponent(document.querySelector('meta[name=csrf-token]').content)}).then(r => r.status)`)
	require.Equal(t, http.StatusUnauthorized, status)

	// Signed in: the same POST without the token is refused (403), with it, it would pass.
	b.signIn(base)
	status = eval[int](b, `fetch('`+retryURL+`', {method: 'POST'}).then(r => r.status)`)
	require.Equal(t, http.StatusForbidden, status)
	status = eval[int](b, `fetch('`+retryURL+`', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'},
		body: 'csrf_token=forged'}).then(r => r.status)`)
	require.Equal(t, http.StatusForbidden, status)

	// Signed in, a page of another origin posts a form to the dashboard: refused.
	b.do(chromedp.Navigate(evil.URL))
	require.Eventually(t, func() bool {
		return strings.Contains(eval[string](b, `document.body.innerText`), "CSRF")
	}, 30*time.Second, 50*time.Millisecond, "the forged form lands on the refusal")
	require.Equal(t, taskorch.StatusDead, taskStatus(t, pool, s.dead), "nothing changed")

	// The real button works.
	b.do(
		chromedp.Navigate(base+"/tasks/"+itoa(s.dead)),
		click(`#retry`),
		chromedp.WaitVisible(chromedp.CSS(`#flash`)),
	)
	require.Equal(t, taskorch.StatusPending, taskStatus(t, pool, s.dead))
}
