package browser_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/scaffold"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// A scaffolded process with a wait step, run by a real worker: the invoice paid ends
// succeeded, the one whose signal does not come in time ends timed_out. The dashboard shows
// timed_out as its own outcome everywhere an instance's state shows (the instances page and its
// filter, the instance's page, the process's page and the processes page), and the overview's
// "Failed processes" card does not count it: not paid in time is not a failure.
func TestBrowserTimedOutProcess(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 12})
	ctx := t.Context()
	sql, err := scaffold.Render(scaffold.Process{Name: "remind_unpaid", Schema: "billing", Key: "invoice_id",
		Channel: taskorch.TypeEmail, WaitSignal: "invoice.paid", WaitTimeout: "1 second"})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, string(sql))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `update billing.process_config set backoff_base = '0', backoff_max = '0', check_interval = '1 second'`)
	require.NoError(t, err)

	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		Channels: map[string]taskorch.ChannelProvider{taskorch.TypeEmail: taskorch.ChannelProviderFunc(
			func(context.Context, taskorch.ChannelCall) (json.RawMessage, error) {
				return json.RawMessage(`{"id":"m-1"}`), nil
			})},
		Concurrency: 4, PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(wctx) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-stopped)
	})

	_, err = pool.Exec(ctx, `select queues.signal('invoice.paid', '1', '{}')`)
	require.NoError(t, err)
	var paid, unpaid int64
	require.NoError(t, pool.QueryRow(ctx, `select remind_unpaid_task_id from billing.kickoff_remind_unpaid(1)`).Scan(&paid))
	require.NoError(t, pool.QueryRow(ctx, `select remind_unpaid_task_id from billing.kickoff_remind_unpaid(2)`).Scan(&unpaid))
	require.Eventually(t, func() bool {
		var done bool
		err := pool.QueryRow(ctx, `select exists (select from billing.remind_unpaid_task_succeeded where remind_unpaid_task_id = $1)
			and exists (select from billing.remind_unpaid_task_timed_out where remind_unpaid_task_id = $2)`, paid, unpaid).Scan(&done)
		return err == nil && done
	}, 60*time.Second, 50*time.Millisecond, "the paid invoice's process succeeded, the unpaid one's timed out")

	base := browserDashboard(t, pool)
	b := newBrowser(t)
	b.signIn(base)
	b.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#failed-processes`)))
	require.Zero(t, eval[int](b, `document.querySelectorAll('#failed-processes tr[data-process="billing.remind_unpaid"]').length`),
		"a timed-out instance is not a failed process")

	b.do(chromedp.Navigate(base+"/processes/instances"), chromedp.WaitVisible(chromedp.CSS(`a[data-state="timed_out"]`)))
	b.do(click(`a[data-state="timed_out"]`), chromedp.WaitVisible(chromedp.CSS(`tr[data-instance="`+itoa(unpaid)+`"]`)))
	require.Zero(t, eval[int](b, `document.querySelectorAll('tr[data-instance="`+itoa(paid)+`"]').length`), "only timed-out instances")
	row := b.text(`tr[data-instance="` + itoa(unpaid) + `"]`)
	require.Contains(t, row, "timed_out")
	require.Contains(t, row, "no invoice.paid signal within 00:00:01")
	b.screenshot("process_instances_timed_out")

	b.do(click(`tr[data-instance="`+itoa(unpaid)+`"] td.num a`), chromedp.WaitVisible(chromedp.CSS(`.instance-state`)))
	require.Contains(t, b.text(`.instance-state`), "timed_out")
	require.Contains(t, b.text(`h3.timed-out`), "timed out")
	require.Zero(t, eval[int](b, `document.querySelectorAll('#retry-process').length`), "a timed-out instance is not retried by hand")
	b.screenshot("process_instance_timed_out")

	b.do(chromedp.Navigate(base+"/processes/billing.remind_unpaid"), chromedp.WaitVisible(chromedp.CSS(`tr[data-root="`+itoa(unpaid)+`"]`)))
	require.Contains(t, b.text(`tr[data-root="`+itoa(unpaid)+`"] .pstate`), "timed_out")
	require.Contains(t, b.text(`tr[data-root="`+itoa(paid)+`"] .pstate`), "succeeded")

	b.do(chromedp.Navigate(base+"/processes"), chromedp.WaitVisible(chromedp.CSS(`tr[data-process="billing.remind_unpaid"]`)))
	require.Equal(t, "1", strings.TrimSpace(b.text(`tr[data-process="billing.remind_unpaid"] td.timed-out`)))
	require.Zero(t, b.dialogCount())
}
