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
	"github.com/taskorch/taskorch/internal/scaffold"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/providers"
)

// An email the outbox refuses every time fails after 3 attempts with a real worker: the
// overview's "Failed processes" card counts it and links to the list of failed instances,
// which links to its page, where the attempts are numbered 1..3 (not by their global ids).
func TestBrowserFailedProcessCard(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 12})
	ctx := t.Context()
	_, err := pool.Exec(ctx, `update comms.process_config set backoff_base = '0', backoff_max = '0', check_interval = '1 second' where process = 'send_email';
		insert into queues.outbox_rule (channel, recipient, fail) values ('email', 'gone@example.com', 'always')`)
	require.NoError(t, err)
	// Attempt ids shared with another instance, so that the numbers 1..n differ from the ids.
	var ok, gone int64
	require.NoError(t, pool.QueryRow(ctx, `select comms.send_email('ann@example.com', 'Hi', 'hi')`).Scan(&ok))
	require.NoError(t, pool.QueryRow(ctx, `select comms.send_email('gone@example.com', 'Hello', 'hi')`).Scan(&gone))

	channels, err := providers.Config{EmailProvider: "outbox"}.Channels(pool)
	require.NoError(t, err)
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		Channels: channels, Concurrency: 4, PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond,
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
		err := pool.QueryRow(ctx, `select exists (select from comms.send_email_task_failed where send_email_task_id = $1)
			and exists (select from comms.send_email_task_succeeded where send_email_task_id = $2)`, gone, ok).Scan(&done)
		return err == nil && done
	}, 60*time.Second, 50*time.Millisecond, "one email failed after 3 attempts, the other sent")

	base := browserDashboard(t, pool)
	b := newBrowser(t)
	b.signIn(base)
	b.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#failed-processes tr[data-process="comms.send_email"]`)))
	require.Contains(t, b.text(`#failed-processes h2`), "Failed processes 1")
	require.Equal(t, "1", strings.TrimSpace(b.text(`#failed-processes tr[data-process="comms.send_email"] td.num`)))
	b.screenshot("overview_failed_processes")

	b.do(click(`#failed-processes tr[data-process="comms.send_email"] a`),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-instance="`+itoa(gone)+`"]`)))
	require.Zero(t, eval[int](b, `document.querySelectorAll('tr[data-instance="`+itoa(ok)+`"]').length`), "only failed instances")
	row := b.text(`tr[data-instance="` + itoa(gone) + `"]`)
	require.Contains(t, row, "failed")
	require.Contains(t, row, "email not sent after 3 failed attempts")
	b.screenshot("process_instances_failed")

	b.do(click(`tr[data-instance="`+itoa(gone)+`"] td.num a`), chromedp.WaitVisible(chromedp.CSS(`tr[data-attempt]`)))
	require.Equal(t, []string{"1", "2", "3"}, eval[[]string](b, `Array.from(document.querySelectorAll('tr[data-attempt] td.attempt-n')).map(td => td.innerText)`))
	require.Equal(t, 3, eval[int](b, `document.querySelectorAll('tr.outcome-failed').length`))
	require.Contains(t, b.text(`.instance-state`), "failed")
	require.Zero(t, b.dialogCount())
	b.screenshot("process_instance_failed")
}

// Every shipped process (comms, files, accounts) and a scaffolded one is found by the
// dashboard's discovery and is registered: each has its page, and the instances page lists
// their instances. An account deletion's page links to the file deletion it started, which
// links back.
func TestProcessDiscoveryShippedAndScaffolded(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ctx := t.Context()
	_, err := taskorch.Migrate(ctx, pool, &taskorch.MigrateOpts{Processes: taskorch.ProcessSets()})
	require.NoError(t, err)
	for _, p := range []scaffold.Process{
		{Name: "rebuild_summary", Schema: "reports"},
		{Name: "send_reminder", Schema: "crm", Channel: taskorch.TypeEmail},
	} {
		sql, err := scaffold.Render(p)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, string(sql))
		require.NoError(t, err)
	}
	for _, sql := range []string{
		`select comms.send_email('ann@example.com', 'Hi', 'hi')`,
		`select comms.send_sms('+15550100', 'hi')`,
		`insert into accounts.account (email) values ('ann@example.com')`,
		`insert into files.file (bucket, object_key, owner_account_id) values ('recordings', 'a.wav', 1)`,
		`select api.request_account_deletion(1)`,
		`select files.kickoff_file_deletion(1)`,
		`select accounts.kickoff_account_anonymization(1)`,
		`select reports.kickoff_rebuild_summary(7)`,
		`select crm.kickoff_send_reminder(42)`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	want := []string{"accounts.account_anonymization", "accounts.account_deletion", "comms.send_email", "comms.send_sms",
		"crm.send_reminder", "files.file_deletion", "reports.rebuild_summary"}
	var registered []string
	require.NoError(t, pool.QueryRow(ctx, `select array_agg(process order by process) from queues.process`).Scan(&registered))
	require.Equal(t, want, registered, "every shipped and scaffolded process registers itself")

	h, err := dashboard.New(pool, dashboard.Config{Token: testToken, RefreshInterval: -1})
	require.NoError(t, err)
	base := newServer(t, h).URL
	c := browserlessClient(t)
	_, body, _ := get(t, c, base+"/processes", bearer()...)
	_, list, _ := get(t, c, base+"/processes/instances", bearer()...)
	for _, p := range want {
		require.Contains(t, body, `data-process="`+p+`"`, "discovered by the naming pattern")
		require.Contains(t, list, `data-process="`+p+`" data-instance="1"`, "listed with its instances")
		code, page, _ := get(t, c, base+"/processes/"+p+"/1", bearer()...)
		require.Equal(t, http.StatusOK, code, p)
		require.Contains(t, page, `class="instance-state"`, p)
	}

	_, page, _ := get(t, c, base+"/processes/accounts.account_deletion/1", bearer()...)
	require.Contains(t, page, `href="/processes/files.file_deletion/1"`, "links to the file deletion it started")
	require.Contains(t, page, `href="/processes/accounts.account_anonymization/1"`, "and to the anonymization")
	_, page, _ = get(t, c, base+"/processes/files.file_deletion/1", bearer()...)
	require.Contains(t, page, `started by <a href="/processes/accounts.account_deletion/1">accounts.account_deletion 1</a>`)

	// Bad filters: a clear 400 or 404, nothing listed.
	for path, want := range map[string]int{
		"/processes/instances?state=stuck":           http.StatusBadRequest,
		"/processes/instances?limit=0":               http.StatusBadRequest,
		"/processes/instances?process=comms.nothing": http.StatusNotFound,
	} {
		code, page, _ := get(t, c, base+path, bearer()...)
		require.Equal(t, want, code, path)
		require.NotContains(t, page, "data-instance=", path)
	}
	code, page, _ := get(t, c, base+"/processes/instances?state=running&process=comms.send_email", bearer()...)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, `data-process="comms.send_email" data-instance="1"`)
	require.NotContains(t, page, `data-process="comms.send_sms"`)
}
