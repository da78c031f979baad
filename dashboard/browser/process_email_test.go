package browser_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/dashboard"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/providers"
)

// TestEmailProcessEndToEnd sends an email through the shipped comms process with a real worker
// and the outbox provider, which refuses the first delivery: the processes page shows the
// email with 2 attempts, 1 failed and 1 succeeded, the queue tasks that ran it, and the outbox
// both deliveries.
func TestEmailProcessEndToEnd(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 12})
	ctx := t.Context()
	_, err := pool.Exec(ctx, `update comms.process_config set backoff_base = '0', check_interval = '1 second' where process = 'send_email';
		insert into queues.outbox_rule (channel, recipient, fail) values ('email', 'flaky@example.com', 'once')`)
	require.NoError(t, err)
	var id int64
	require.NoError(t, pool.QueryRow(ctx, `select comms.send_email('flaky@example.com', 'Hello <b>there</b>', 'hi')`).Scan(&id))

	channels, err := providers.Config{EmailProvider: "outbox"}.Channels(pool)
	require.NoError(t, err)
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		Channels: channels, Concurrency: 4, PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond,
		ID: "email-test-worker",
	})
	require.NoError(t, err)
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(wctx) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-stopped)
	})
	require.Eventually(t, func() bool {
		var done bool
		err := pool.QueryRow(ctx, `select exists (select from comms.send_email_task_succeeded where send_email_task_id = $1)`, id).Scan(&done)
		return err == nil && done
	}, 60*time.Second, 50*time.Millisecond, "the email is sent on its second attempt")

	h, err := dashboard.New(pool, dashboard.Config{Token: testToken, RefreshInterval: -1})
	require.NoError(t, err)
	base := newServer(t, h).URL
	c := browserlessClient(t)
	code, body, _ := get(t, c, base+"/processes", bearer()...)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `data-process="comms.send_email"`)
	require.Contains(t, body, `data-process="comms.send_sms"`)

	b := newBrowser(t)
	b.signIn(base)
	b.do(chromedp.Navigate(base+"/processes/comms.send_email"), chromedp.WaitVisible(chromedp.CSS(`tr[data-root="`+itoa(id)+`"]`)))
	require.Contains(t, b.text(`tr[data-root="`+itoa(id)+`"]`), "succeeded")
	b.screenshot("process_email_list")
	b.do(chromedp.Navigate(base+"/processes/comms.send_email/"+itoa(id)), chromedp.WaitVisible(chromedp.CSS(`tr[data-attempt]`)))
	require.Equal(t, 2, eval[int](b, `document.querySelectorAll('tr[data-attempt]').length`))
	require.Equal(t, 1, eval[int](b, `document.querySelectorAll('tr.outcome-failed').length`))
	require.Equal(t, 1, eval[int](b, `document.querySelectorAll('tr.outcome-succeeded').length`))
	require.Contains(t, b.text(`tr.outcome-failed`), "delivery refused by a rule")
	// Both email tasks are linked. (The send processes' supervisor runs as ticks over every due
	// send, so no supervisor run belongs to this instance alone.)
	tasks := eval[[]string](b, `Array.from(document.querySelectorAll('a[href*="/tasks/"]')).map(a => a.closest('tr').innerText)`)
	var supervisor, email, providerFailed int
	for _, row := range tasks {
		switch {
		case strings.Contains(row, "comms.send_email_supervisor"):
			supervisor++
		case strings.Contains(row, "email"):
			email++
			if strings.Contains(row, "provider failed") {
				providerFailed++
			}
		}
	}
	require.Zero(t, supervisor, "no per-instance supervisor run: %q", tasks)
	require.GreaterOrEqual(t, email, 2, "the two email tasks: %q", tasks)
	require.Equal(t, 1, providerFailed, "the email task of the refused delivery says its provider failed: %q", tasks)
	b.screenshot("process_email")

	// An email task's page links back to the process.
	// The instance page shows JSON too, so wait for the task page's heading.
	b.do(click(`tr.outcome-failed a[href*="/tasks/"]`), chromedp.WaitVisible(chromedp.CSS(`body:not([data-stale]) h1 .type`)))
	require.Contains(t, b.text("#content"), "comms.send_email "+itoa(id))

	// The outbox shows the refused delivery and the sent one.
	b.do(chromedp.Navigate(base+"/outbox?channel=email"), chromedp.WaitVisible(chromedp.CSS(`tr[data-message]`)))
	require.Equal(t, 1, eval[int](b, `document.querySelectorAll('tr.status-failed').length`))
	require.Equal(t, 1, eval[int](b, `document.querySelectorAll('tr.status-sent').length`))
	require.Contains(t, b.text("#content"), "flaky@example.com")
	b.screenshot("outbox_email")
}
