package browser_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/dashboard"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// With only a worker that has no email provider, email tasks stay pending, no attempt spent, and
// the overview and the queues page say that no worker claims email and how long the oldest has
// waited. Once a worker with a provider runs, the tasks complete and the warning goes, by the
// live refresh.
func TestBrowserUnservedType(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("marker", func(context.Context, *taskorch.Task) error { return nil })
	runWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, ID: "no-email"})

	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	var emails []int64
	for range 3 {
		res, err := c.Enqueue(t.Context(), taskorch.RawArgs{Type: "email", Payload: json.RawMessage(`{"to": "ada@example.com", "subject": "Hi", "text": "Hello"}`)}, nil)
		require.NoError(t, err)
		emails = append(emails, res.TaskID)
	}
	// Enqueued after them, so after them in claim order: once it ran, the worker went past them.
	marker, err := c.Enqueue(t.Context(), taskorch.RawArgs{Type: "marker", Payload: json.RawMessage(`{}`)}, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return taskStatus(t, pool, marker.TaskID) == taskorch.StatusCompleted },
		30*time.Second, 20*time.Millisecond, "the worker runs the marker")
	for _, id := range emails {
		task, err := c.Get(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, taskorch.StatusPending, task.Status)
		require.Zero(t, task.Attempt, "no attempt spent")
	}

	h, err := dashboard.New(pool, dashboard.Config{Token: testToken, RefreshInterval: 400 * time.Millisecond})
	require.NoError(t, err)
	base := newServer(t, h).URL
	b := newBrowser(t)
	b.signIn(base)
	const warning = `p.unserved[data-unserved="email"]`
	b.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(warning)))
	require.Regexp(t, `^No live worker claims email tasks: 3 due, the oldest waiting [0-9.]+m?s\. They wait, spending no attempt, for a worker with an email provider \(TASKORCH_EMAIL_PROVIDER\)\.$`,
		b.text(warning))
	require.Equal(t, 1, eval[int](b, `document.querySelectorAll('p.unserved').length`), "marker is served")
	b.screenshot("overview_unserved")
	b.do(chromedp.Navigate(base+"/queues"), chromedp.WaitVisible(chromedp.CSS(warning)))
	require.Equal(t, "0 unserved", b.text(`tr[data-queue="email"] td.workers`))
	require.Equal(t, "1", b.text(`tr[data-queue="marker"] td.workers`))
	b.screenshot("queues_unserved")

	// A worker with a provider: the tasks complete, and the page's live refresh drops the warning.
	sent := taskorch.ChannelProviderFunc(func(context.Context, taskorch.ChannelCall) (json.RawMessage, error) {
		return json.RawMessage(`{"id": "sent"}`), nil
	})
	runWorker(t, pool, &taskorch.WorkerConfig{ID: "with-email", Channels: map[string]taskorch.ChannelProvider{taskorch.TypeEmail: sent}})
	b.do(chromedp.WaitNotPresent(chromedp.CSS(`p.unserved`)))
	require.Equal(t, "1", b.text(`tr[data-queue="email"] td.workers`))
	for _, id := range emails {
		require.Eventually(t, func() bool { return taskStatus(t, pool, id) == taskorch.StatusCompleted },
			30*time.Second, 20*time.Millisecond, "the worker with a provider sends task %d", id)
	}
}

// runWorker runs a worker with a short poll interval until the test ends.
func runWorker(t *testing.T, pool *pgxpool.Pool, cfg *taskorch.WorkerConfig) {
	t.Helper()
	cfg.Concurrency, cfg.PollInterval, cfg.MaxPollInterval = 2, 20*time.Millisecond, 200*time.Millisecond
	w, err := taskorch.NewWorker(pool, cfg)
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-stopped)
	})
}
