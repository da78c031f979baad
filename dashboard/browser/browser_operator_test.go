package browser_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/dashboard"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// signInWith signs in on the dashboard's page with the given token.
func (b *browser) signInWith(base, token string) {
	b.t.Helper()
	b.do(
		chromedp.Navigate(base+"/login"),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), token),
		chromedp.Submit(chromedp.CSS(`input[name=token]`)),
		chromedp.WaitVisible(chromedp.CSS(`form[action$="/logout"]`)),
	)
}

// startWorker runs a real worker over pool until the test ends, with the handlers given.
func startWorker(t *testing.T, pool *pgxpool.Pool, id string, hs *taskorch.Handlers) {
	t.Helper()
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		Handlers: hs, Concurrency: 4, PollInterval: 20 * time.Millisecond,
		MaxPollInterval: 200 * time.Millisecond, ID: id,
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

// TestBrowserRetryAllMatching: a real worker's tasks go dead while their downstream is down, 30
// of them, more than the dead page's 25 rows; once it is back, Ann presses "Retry all 30" in
// Chromium without ticking a row: every one of them is retried, recorded as hers, and the worker
// completes them, the page emptying itself.
func TestBrowserRetryAllMatching(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 12})
	var healthy atomic.Bool
	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(_ context.Context, _ *taskorch.TaskFor[flakyArgs]) error {
		if !healthy.Load() {
			return errors.New("downstream is down")
		}
		return nil
	})
	startWorker(t, pool, "retry-all-worker", hs)
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	var ids []int64
	for i := range 30 {
		res, err := c.Enqueue(t.Context(), flakyArgs{N: i}, &taskorch.EnqueueOpts{MaxAttempts: 1})
		require.NoError(t, err)
		ids = append(ids, res.TaskID)
	}
	require.Eventually(t, func() bool {
		return q[int](t, pool, `select count(*) from queues.task where task_type = 'flaky.job' and status = 'dead'`) == 30
	}, 30*time.Second, 20*time.Millisecond, "the worker makes them dead")
	other := seedDeadOfAnotherType(t, pool)
	healthy.Store(true)

	h, err := dashboard.New(pool, dashboard.Config{Tokens: map[string]string{"ann": annToken}, RefreshInterval: 400 * time.Millisecond})
	require.NoError(t, err)
	base := newServer(t, h).URL
	b := newBrowser(t)
	b.signInWith(base, annToken)
	b.do(
		chromedp.Navigate(base+"/dead?type=flaky.job&limit=25"),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-all [data-matching="30"]`)),
	)
	require.Equal(t, 25, eval[int](b, `document.querySelectorAll('tr[data-task-id]').length`), "one page shows 25")
	require.Equal(t, "Retry all 30", b.text(`button[data-bulk-action="retry"]`))
	b.screenshot("dead_all_matching")
	b.do(
		click(`button[data-bulk-action="retry"]`),
		chromedp.WaitVisible(chromedp.CSS(`body:not([data-stale]) #flash`)),
	)
	require.Contains(t, b.text("#flash"), "Retried all 30 matching tasks.")
	require.Equal(t, 1, b.dialogCount(), "it asked first")
	b.do(chromedp.WaitVisible(chromedp.CSS(`td.empty`))) // the live refresh empties the page as they complete
	require.Eventually(t, func() bool {
		return q[int](t, pool, `select count(*) from queues.task where task_id = any ($1) and status = 'completed'`, ids) == 30
	}, 30*time.Second, 20*time.Millisecond, "the worker completes all 30")
	require.Equal(t, 30, q[int](t, pool, `select count(*) from queues.task_event where task_id = any ($1) and event = 'retried' and actor = 'dashboard:ann'`, ids))
	require.Equal(t, taskorch.StatusDead, taskStatus(t, pool, other), "another type stays dead")

	// The task's page says who retried it.
	b.do(chromedp.Navigate(base+"/tasks/"+itoa(ids[29])), chromedp.WaitVisible(chromedp.CSS(`td.by .actor`)))
	require.Equal(t, "dashboard:ann", b.text(`td.by .actor`))
	require.Equal(t, "dashboard:ann", b.text(`#actor`))
}

func seedDeadOfAnotherType(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var id int64
	require.NoError(t, pool.QueryRow(t.Context(), `select queues.enqueue('other.job', '{}')`).Scan(&id))
	_, err := pool.Exec(t.Context(), `update queues.task set status = 'dead', attempt = 1, dead_at = now() where task_id = $1`, id)
	require.NoError(t, err)
	return id
}

// TestBrowserSteerSchedule pauses, resumes, runs now and backfills a schedule from its page in
// Chromium, each recorded as the signed-in person's and listed under "Recent actions".
func TestBrowserSteerSchedule(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	_, err := pool.Exec(t.Context(), `select queues.add_schedule('hourly', '0 * * * *', 'report.build', '{"report": "hourly"}',
		_next_run_at => date_trunc('hour', now()) + interval '1 hour')`)
	require.NoError(t, err)
	h, err := dashboard.New(pool, dashboard.Config{Tokens: map[string]string{"ann": annToken}, RefreshInterval: 400 * time.Millisecond})
	require.NoError(t, err)
	base := newServer(t, h).URL
	b := newBrowser(t)
	b.signInWith(base, annToken)
	row := `tr[data-schedule="hourly"] `

	b.do(chromedp.Navigate(base+"/schedules"), chromedp.WaitVisible(chromedp.CSS(row+`button.pause`)),
		click(row+`button.pause`), chromedp.WaitVisible(chromedp.CSS(`body:not([data-stale]) #flash`)))
	require.Contains(t, b.text("#flash"), "Paused schedule hourly")
	require.Contains(t, b.text(row+`td.state`), "paused by dashboard:ann")
	require.False(t, q[bool](t, pool, `select enabled from queues.schedule where name = 'hourly'`))

	b.do(click(row+`button.run`), chromedp.WaitVisible(chromedp.CSS(`body:not([data-stale]) #flash`)))
	require.Regexp(t, `Enqueued task \d+ of schedule hourly now\.`, b.text("#flash"))
	require.Equal(t, 1, q[int](t, pool, `select count(*) from queues.task where idempotency_key like 'schedule:hourly:now:%'`))

	b.do(click(row+`button.resume`), chromedp.WaitVisible(chromedp.CSS(`body:not([data-stale]) #flash`)))
	require.Contains(t, b.text("#flash"), "Resumed schedule hourly")
	require.True(t, q[bool](t, pool, `select enabled and next_run_at > now() from queues.schedule where name = 'hourly'`))

	// Backfill the last three hours' ticks: open the form, fill the window's start, submit. The
	// start is a minute past the hour three hours back, so that the window holds three ticks
	// whatever the minute (at hh:00 the window now - 3 hours began on a tick and held four).
	from := q[string](t, pool, `select to_char((date_trunc('hour', now(), 'UTC') - interval '3 hours' + interval '1 minute') at time zone 'UTC',
		'YYYY-MM-DD"T"HH24:MI')`)
	b.do(chromedp.Evaluate[chromedp.Void](`(() => {
		document.body.dataset.stale = '1';
		const d = document.querySelector('`+row+`details.backfill');
		d.open = true;
		const f = d.querySelector('form');
		f.querySelector('input[name=from]').value = '`+from+`';
		f.requestSubmit();
	})()`), chromedp.WaitVisible(chromedp.CSS(`body:not([data-stale]) #flash`)))
	require.Contains(t, b.text("#flash"), "Backfilled schedule hourly: 3 ticks")
	require.Contains(t, b.text("#flash"), "3 enqueued, 0 enqueued already")
	require.Equal(t, 3, q[int](t, pool, `select count(*) from queues.task where idempotency_key ~ '^schedule:hourly:\d{4}-\d\d-\d\dT\d\d:00:00Z$'`))

	require.Equal(t, []string{"backfilled dashboard:ann", "resumed dashboard:ann", "run_now dashboard:ann", "paused dashboard:ann"},
		eval[[]string](b, `Array.from(document.querySelectorAll('tr[data-schedule-event]')).map(r => r.cells[2].innerText + ' ' + r.cells[3].innerText)`))
	b.screenshot("schedules_steered")
}

// TestBrowserQuietWorker quiets a worker and resumes it from the workers page in Chromium, each
// recorded as the signed-in person's; the worker's heartbeat then says so
// (queues.heartbeat_worker_state: what the worker acts on, TestQuietWorkerFinishesAndClaimsNothing).
func TestBrowserQuietWorker(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	_, err := pool.Exec(t.Context(), `select * from queues.register_worker_instance('web-1/a', 'p1', 'host-a', 7, 4, 'v', 'postgres', null, false, interval '30 seconds')`)
	require.NoError(t, err)
	h, err := dashboard.New(pool, dashboard.Config{Tokens: map[string]string{"ann": annToken}, RefreshInterval: 400 * time.Millisecond})
	require.NoError(t, err)
	base := newServer(t, h).URL
	b := newBrowser(t)
	b.signInWith(base, annToken)
	row := `tr[data-worker="web-1/a"] `

	b.do(chromedp.Navigate(base+"/workers"), chromedp.WaitVisible(chromedp.CSS(row+`button.quiet`)),
		click(row+`button.quiet`), chromedp.WaitVisible(chromedp.CSS(`body:not([data-stale]) #flash`)))
	require.Contains(t, b.text("#flash"), "Quieted worker web-1/a")
	require.Contains(t, b.text(row+`td.state`), "quiet by dashboard:ann")
	require.Equal(t, "quiet", q[string](t, pool, `select queues.heartbeat_worker_state('web-1/a', 'p1')`))
	b.screenshot("worker_quiet")

	b.do(click(row+`button.resume`), chromedp.WaitVisible(chromedp.CSS(`body:not([data-stale]) #flash`)))
	require.Contains(t, b.text("#flash"), "Resumed worker web-1/a")
	require.Contains(t, b.text(row+`td.state`), "active")
	require.Equal(t, "active", q[string](t, pool, `select queues.heartbeat_worker_state('web-1/a', 'p1')`))
	require.Equal(t, []string{"quieted dashboard:ann", "resumed dashboard:ann"},
		q[[]string](t, pool, `select array_agg(event || ' ' || actor order by worker_event_id) from queues.worker_event`))
}

// TestBrowserRunningLongest: a real worker runs two tasks that do not end; the running page
// lists them longest-running first with their worker, and a task cancelled from its page leaves
// the list without a reload.
func TestBrowserRunningLongest(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 12})
	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(ctx context.Context, _ *taskorch.TaskFor[stuckArgs]) error {
		<-ctx.Done() // until cancelled or the worker stops
		return ctx.Err()
	})
	startWorker(t, pool, "stuck-worker", hs)
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	var ids []int64
	for i := range 2 {
		res, err := c.Enqueue(t.Context(), stuckArgs{N: i}, nil)
		require.NoError(t, err)
		ids = append(ids, res.TaskID)
		require.Eventually(t, func() bool { return taskStatus(t, pool, res.TaskID) == taskorch.StatusRunning },
			30*time.Second, 10*time.Millisecond)
	}
	base := browserDashboard(t, pool)
	b := newBrowser(t)
	b.signIn(base)
	b.do(chromedp.Navigate(base+"/running"), chromedp.WaitVisible(chromedp.CSS(`tr[data-task-id="`+itoa(ids[1])+`"]`)))
	require.Equal(t, []string{itoa(ids[0]), itoa(ids[1])},
		eval[[]string](b, `Array.from(document.querySelectorAll('table.running tr[data-task-id]')).map(r => r.dataset.taskId)`), "longest first")
	require.Contains(t, b.text(`tr[data-task-id="`+itoa(ids[0])+`"]`), "stuck-worker")
	b.screenshot("running_longest")

	b.do(
		chromedp.Navigate(base+"/tasks/"+itoa(ids[0])),
		chromedp.WaitVisible(chromedp.CSS(`h1 .st-running`)),
		click(`#cancel`),
		chromedp.WaitVisible(chromedp.CSS(`body:not([data-stale]) #flash`)),
		chromedp.Navigate(base+"/running"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-task-id="`+itoa(ids[1])+`"]`)),
	)
	require.Equal(t, []string{itoa(ids[1])},
		eval[[]string](b, `Array.from(document.querySelectorAll('table.running tr[data-task-id]')).map(r => r.dataset.taskId)`))
}

// stuckArgs is the payload of a task whose handler never ends on its own.
type stuckArgs struct {
	N int `json:"n"`
}

func (stuckArgs) TaskType() string { return "stuck.job" }

// q returns the one value sql selects.
func q[T any](t *testing.T, pool *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, pool.QueryRow(t.Context(), sql, args...).Scan(&v), sql)
	return v
}
