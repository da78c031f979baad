package browser_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/providers"
)

// An email the provider refuses permanently (a Resend-protocol server answering 422 for the
// address) fails after 1 of its 3 attempts; its page says the failure was permanent, on the
// instance and on the attempt. Once the address is corrected, the Retry process form sends it,
// and the page keeps attempt 1 marked permanent.
func TestBrowserPermanentFailure(t *testing.T) {
	t.Parallel()
	resend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			To []string `json:"to"`
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if json.Unmarshal(body, &req) != nil || len(req.To) != 1 || req.To[0] == "typo@example.con" {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"statusCode":422,"name":"validation_error","message":"Invalid `+"`to`"+` field."}`)
			return
		}
		_, _ = io.WriteString(w, `{"id":"49a3999c-0ce1-4ea6-ab68-afcd6dc2e794"}`)
	}))
	t.Cleanup(resend.Close)
	email, err := providers.NewResend(providers.ResendConfig{APIKey: "re_test_key", BaseURL: resend.URL, From: "noreply@example.com"})
	require.NoError(t, err)

	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 12})
	ctx := t.Context()
	_, err = pool.Exec(ctx, `update comms.process_config set backoff_base = '0', check_interval = '1 second' where process = 'send_email'`)
	require.NoError(t, err)
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		Channels: map[string]taskorch.ChannelProvider{taskorch.TypeEmail: email}, Concurrency: 4,
		PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(wctx) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-stopped)
	})

	var id int64
	require.NoError(t, pool.QueryRow(ctx, `select comms.send_email('typo@example.con', 'Hello', 'hi')`).Scan(&id))
	require.Eventually(t, func() bool {
		var done bool
		err := pool.QueryRow(ctx, `select exists (select from comms.send_email_task_failed where send_email_task_id = $1)`, id).Scan(&done)
		return err == nil && done
	}, 60*time.Second, 50*time.Millisecond, "the email failed")

	base := browserDashboard(t, pool)
	b := newBrowser(t)
	b.signIn(base)
	page := base + "/processes/comms.send_email/" + itoa(id)
	b.do(chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`tr[data-attempt]`)))
	state := b.text(`.instance-state`)
	require.Contains(t, state, "failed")
	require.Contains(t, state, "permanent failure, not retried")
	require.Contains(t, state, "permanent: email not sent: email provider: resend: 422 validation_error")
	require.Equal(t, 1, eval[int](b, `document.querySelectorAll('tr[data-attempt]').length`), "exactly 1 attempt of 3")
	require.Contains(t, b.text(`tr.outcome-failed`), "failed permanent")
	require.Equal(t, 1, eval[int](b, `document.querySelectorAll('tr.outcome-failed .permanent').length`))
	b.screenshot("process_instance_permanent")

	// The address is corrected; the form retries the instance.
	_, err = pool.Exec(ctx, `update comms.email_message m set to_address = 'ann@example.com' from comms.send_email_task t
		where t.send_email_task_id = $1 and m.message_id = t.message_id`, id)
	require.NoError(t, err)
	b.do(chromedp.Evaluate[chromedp.Void](`(() => {
		document.querySelector('#retry-reason').value = 'address corrected';
		document.body.dataset.stale = '1';
		document.querySelector('#retry-process').click();
	})()`), chromedp.WaitVisible(chromedp.CSS(`#flash`)))
	require.Contains(t, b.text(`#flash`), "Restarted comms.send_email "+itoa(id)+" (run 2)")
	require.Eventually(t, func() bool {
		b.do(chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`.instance-state`)))
		return strings.Contains(b.text(`.instance-state`), "succeeded") &&
			eval[int](b, `document.querySelectorAll('tr[data-attempt]').length`) == 2
	}, 60*time.Second, 200*time.Millisecond, "run 2's attempt sent it")
	require.NotContains(t, b.text(`.instance-state`), "permanent")
	require.Equal(t, "1", eval[string](b, `document.querySelector('tr.outcome-failed').dataset.n`))
	require.Equal(t, 1, eval[int](b, `document.querySelectorAll('tr.outcome-failed .permanent').length`), "attempt 1 stays marked")
	require.Zero(t, b.dialogCount())
}
