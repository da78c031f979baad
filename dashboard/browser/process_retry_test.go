package browser_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/dashboard"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/providers"
)

// runOutboxWorker runs a worker sending email through the outbox provider until the test ends.
func runOutboxWorker(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	channels, err := providers.Config{EmailProvider: "outbox"}.Channels(pool)
	require.NoError(t, err)
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		Channels: channels, Concurrency: 4, PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	wctx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(wctx) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-stopped)
	})
}

// failedEmail sends an email the outbox refuses until the rule is deleted, and waits until the
// process has given up after its 3 attempts.
func failedEmail(t *testing.T, pool *pgxpool.Pool, to string) int64 {
	t.Helper()
	ctx := t.Context()
	_, err := pool.Exec(ctx, `update comms.process_config set backoff_base = '0', backoff_max = '0', check_interval = '1 second' where process = 'send_email';
		insert into queues.outbox_rule (channel, recipient, fail) values ('email', '`+to+`', 'always')`)
	require.NoError(t, err)
	var id int64
	require.NoError(t, pool.QueryRow(ctx, `select comms.send_email($1, 'Hello', 'hi')`, to).Scan(&id))
	require.Eventually(t, func() bool {
		var done bool
		err := pool.QueryRow(ctx, `select exists (select from comms.send_email_task_failed where send_email_task_id = $1)`, id).Scan(&done)
		return err == nil && done
	}, 60*time.Second, 50*time.Millisecond, "the email failed after 3 attempts")
	return id
}

// A failed email is retried from its page with a reason after the provider was fixed: the
// flash says which run started, and the page then shows it succeeded, the restart fact with
// the reason next to run 1's failure, and attempt 4 (the new run's) numbered after 1..3.
func TestBrowserRetryFailedProcess(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 12})
	runOutboxWorker(t, pool)
	id := failedEmail(t, pool, "fixme@example.com")

	base := browserDashboard(t, pool)
	b := newBrowser(t)
	b.signIn(base)
	page := base + "/processes/comms.send_email/" + itoa(id)
	b.do(chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`#retry-process`)))
	require.Contains(t, b.text(`.instance-state`), "failed")
	b.screenshot("process_instance_retry_form")

	// The provider is fixed: the outbox no longer refuses the address.
	_, err := pool.Exec(t.Context(), `delete from queues.outbox_rule where recipient = 'fixme@example.com'`)
	require.NoError(t, err)
	b.do(chromedp.Evaluate[chromedp.Void](`(() => {
		document.querySelector('#retry-reason').value = 'mailbox restored';
		document.body.dataset.stale = '1';
		document.querySelector('#retry-process').click();
	})()`), chromedp.WaitVisible(chromedp.CSS(`#flash`)))
	require.Contains(t, b.text(`#flash`), "Restarted comms.send_email "+itoa(id)+" (run 2)")

	require.Eventually(t, func() bool {
		b.do(chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`.instance-state`)))
		return strings.Contains(b.text(`.instance-state`), "succeeded") &&
			eval[int](b, `document.querySelectorAll('tr[data-attempt]').length`) == 4
	}, 60*time.Second, 200*time.Millisecond, "the new run's attempt succeeded")
	require.Equal(t, []string{"1", "2", "3", "4"}, eval[[]string](b, `Array.from(document.querySelectorAll('tr[data-attempt] td.attempt-n')).map(td => td.innerText)`))
	require.Equal(t, 3, eval[int](b, `document.querySelectorAll('tr.outcome-failed').length`))
	require.Equal(t, "4", eval[string](b, `document.querySelector('tr.outcome-succeeded').dataset.n`))
	require.Contains(t, b.text(`table.restarts tr.run-failed[data-run="1"]`), "email not sent after 3 failed attempts")
	restart := b.text(`table.restarts tr.restart[data-run="2"]`)
	require.Contains(t, restart, "restarted: run 2")
	require.Contains(t, restart, "mailbox restored")
	require.Zero(t, eval[int](b, `document.querySelectorAll('#retry-process').length`), "no retry for a succeeded instance")
	require.Zero(t, b.dialogCount())
	b.screenshot("process_instance_retried")
}

// The retry action: no authentication 401, no or a bad CSRF token 403, a running instance or
// an empty reason refused with the database's message on the page it comes back to; a read-only
// dashboard offers no form and refuses the action. Nothing is written by any of them.
func TestRetryProcessAction(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 12})
	runOutboxWorker(t, pool)
	failed := failedEmail(t, pool, "nobody@example.com")
	var running int64
	require.NoError(t, pool.QueryRow(t.Context(), `select comms.send_email('later@example.com', 'Hi', 'hi', _scheduled_at => now() + interval '1 day')`).Scan(&running))

	h, err := dashboard.New(pool, dashboard.Config{Token: testToken, RefreshInterval: -1})
	require.NoError(t, err)
	srv := newServer(t, h)
	c := browserlessClient(t)
	retry := func(id int64) string { return srv.URL + "/processes/comms.send_email/" + itoa(id) + "/retry" }
	restarts := func() int {
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `select count(*) from comms.send_email_task_restarted`).Scan(&n))
		return n
	}

	code, _ := post(t, c, retry(failed), url.Values{"reason": {"why"}})
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = post(t, c, retry(failed), url.Values{"reason": {"why"}}, bearer()...)
	require.Equal(t, http.StatusForbidden, code, "no CSRF token")
	code, body, _ := get(t, c, srv.URL+"/processes/comms.send_email/"+itoa(failed), bearer()...)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `id="retry-process"`, "a failed instance offers the retry")
	token := csrfFrom(t, body)
	code, _ = post(t, c, retry(failed), url.Values{"reason": {"why"}, "csrf_token": {token + "x"}}, bearer()...)
	require.Equal(t, http.StatusForbidden, code, "a bad CSRF token")
	code, _ = post(t, c, retry(failed), url.Values{"reason": {"why"}, "csrf_token": {token}}, append(bearer(), "Origin", "https://evil.example")...)
	require.Equal(t, http.StatusForbidden, code, "another origin")
	require.Zero(t, restarts(), "refused requests write nothing")

	for _, x := range []struct {
		id     int64
		reason string
		msg    string
	}{
		{running, "why", "Retry refused: retry_send_email: comms.send_email " + itoa(running) + " is running, not failed; only a failed instance can be retried"},
		{failed, "  ", "Retry refused: a reason is required (it is recorded with the restart)"},
		{99999, "why", "Retry refused: retry_send_email: comms.send_email has no instance 99999"},
	} {
		code, loc := post(t, c, retry(x.id), url.Values{"reason": {x.reason}, "csrf_token": {token}}, bearer()...)
		require.Equal(t, http.StatusSeeOther, code)
		require.Equal(t, "/processes/comms.send_email/"+itoa(x.id), loc)
		_, body, _ := get(t, c, srv.URL+loc, bearer()...)
		require.Contains(t, body, `class="flash flash-error"`, x.msg)
		require.Contains(t, body, x.msg)
	}
	_, body, _ = get(t, c, srv.URL+"/processes/comms.send_email/"+itoa(running), bearer()...)
	require.NotContains(t, body, `id="retry-process"`, "a running instance offers no retry")
	require.Zero(t, restarts(), "refused retries write nothing")

	ro, err := dashboard.New(pool, dashboard.Config{Token: testToken, RefreshInterval: -1, ReadOnly: true})
	require.NoError(t, err)
	roSrv := newServer(t, ro)
	_, body, _ = get(t, c, roSrv.URL+"/processes/comms.send_email/"+itoa(failed), bearer()...)
	require.NotContains(t, body, `id="retry-process"`)
	code, _ = post(t, c, roSrv.URL+"/processes/comms.send_email/"+itoa(failed)+"/retry", url.Values{"reason": {"why"}, "csrf_token": {csrfFrom(t, body)}}, bearer()...)
	require.Equal(t, http.StatusForbidden, code)

	// Auth and CSRF: restarted, and the page says which run.
	code, loc := post(t, c, retry(failed), url.Values{"reason": {"mailbox restored"}, "csrf_token": {token}}, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)
	_, body, _ = get(t, c, srv.URL+loc, bearer()...)
	require.Contains(t, body, "Restarted comms.send_email "+itoa(failed)+" (run 2)")
	require.Equal(t, 1, restarts())
}
