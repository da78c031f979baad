package browser_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// The queues page lists each SQL function as a queue of its own: pausing one function's line
// holds its tasks while a worker runs the other function's; resuming it lets them run.
func TestBrowserPauseOneFunction(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	_, err := pool.Exec(t.Context(), `create schema app;
		create function app.held(jsonb) returns jsonb language sql as $$ select '{"success": true}'::jsonb $$;
		create function app.free(jsonb) returns jsonb language sql as $$ select '{"success": true}'::jsonb $$;`)
	require.NoError(t, err)
	enqueue := func(fn string) int64 {
		var id int64
		require.NoError(t, pool.QueryRow(t.Context(), `select queues.enqueue('db_function', jsonb_build_object('db_function', $1::text))`, fn).Scan(&id))
		return id
	}
	held, free := enqueue("app.held"), enqueue("app.free")

	base := browserDashboard(t, pool)
	b := newBrowser(t)
	b.signIn(base)
	const heldRow, freeRow = `tr[data-queue="db_function:app.held"]`, `tr[data-queue="db_function:app.free"]`
	b.do(chromedp.Navigate(base+"/queues"), chromedp.WaitVisible(chromedp.CSS(heldRow)), chromedp.WaitVisible(chromedp.CSS(freeRow)))
	require.Zero(t, eval[int](b, `document.querySelectorAll('tr[data-queue="db_function"]').length`), "no line for db_function itself")
	b.do(click(heldRow+` button`), chromedp.WaitVisible(chromedp.CSS(heldRow+` .badge-paused`)))
	b.screenshot("queues_function_paused")

	runWorker(t, pool, &taskorch.WorkerConfig{ID: "functions"})
	require.Eventually(t, func() bool { return taskStatus(t, pool, free) == taskorch.StatusCompleted },
		30*time.Second, 20*time.Millisecond, "the other function's task runs")
	require.Equal(t, taskorch.StatusPending, taskStatus(t, pool, held), "the paused function's task waits")
	b.do(chromedp.WaitVisible(chromedp.CSS(heldRow + ` .badge-paused`)))
	require.Equal(t, "1", b.text(heldRow+` td.num`), "its one task is due")

	b.do(click(heldRow+` button`), chromedp.WaitNotPresent(chromedp.CSS(heldRow+` .badge-paused`)))
	require.Eventually(t, func() bool { return taskStatus(t, pool, held) == taskorch.StatusCompleted },
		30*time.Second, 20*time.Millisecond, "resumed, it runs")
}
