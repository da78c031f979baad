package taskorch_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// BenchmarkWait measures how late Client.Wait returns after a task's completion: the time from
// the task's completed_at (the completing transaction's start, on the database's clock, which is
// this machine's) to Wait returning, with a worker running a handler that returns a result. The
// re-check is set to an hour, so every return is a notification's. Reports p50, p99 and max.
//
//	one-at-a-time: enqueue, Wait, b.N times in a row
//	all-at-once:   b.N tasks enqueued, b.N Waits registered, then the worker starts
//
// go test -run '^$' -bench BenchmarkWait -benchtime 1000x .
func BenchmarkWait(b *testing.B) {
	setup := func(b *testing.B) (*taskorch.Client, func()) {
		pool := dbtest.NewDBWith(b, dbtest.DBOptions{MaxConns: 32})
		c, err := taskorch.NewClient(pool, nil)
		require.NoError(b, err)
		taskorch.SetWaitRecheck(c, time.Hour)
		hs := taskorch.NewHandlers()
		hs.HandleFunc("ping", func(ctx context.Context, t *taskorch.Task) error {
			return taskorch.SetResult(ctx, map[string]int64{"id": t.ID})
		})
		w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{Logger: quiet, Handlers: hs, Concurrency: 50})
		require.NoError(b, err)
		return c, func() {
			wctx, stop := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = w.Run(wctx) }()
			b.Cleanup(func() { stop(); <-done })
		}
	}
	report := func(b *testing.B, lag []time.Duration) {
		slices.Sort(lag)
		pct := func(p float64) float64 { return float64(lag[int(p*float64(len(lag)-1))].Microseconds()) / 1000 }
		b.ReportMetric(pct(0.50), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
		b.ReportMetric(float64(lag[len(lag)-1].Microseconds())/1000, "max-ms")
	}
	lagOf := func(b *testing.B, t *taskorch.Task, returned time.Time) time.Duration {
		if t.Status != taskorch.StatusCompleted || t.CompletedAt == nil || t.Result == nil {
			b.Fatalf("task %d: %s, completed at %v, result %s", t.ID, t.Status, t.CompletedAt, t.Result)
		}
		return returned.Sub(*t.CompletedAt)
	}

	b.Run("one-at-a-time", func(b *testing.B) {
		ctx := context.Background()
		c, start := setup(b)
		start()
		lag := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			res, err := c.Enqueue(ctx, raw("ping", `{}`), nil)
			if err != nil {
				b.Fatal(err)
			}
			t, err := c.Wait(ctx, res.TaskID)
			returned := time.Now()
			if err != nil {
				b.Fatal(err)
			}
			lag = append(lag, lagOf(b, t, returned))
		}
		b.StopTimer()
		report(b, lag)
	})

	b.Run("all-at-once", func(b *testing.B) {
		ctx := context.Background()
		c, start := setup(b)
		params := make([]taskorch.EnqueueParams, b.N)
		for i := range params {
			params[i] = taskorch.EnqueueParams{Args: raw("ping", `{}`)}
		}
		res, err := c.EnqueueMany(ctx, params)
		require.NoError(b, err)
		type waited struct {
			t        *taskorch.Task
			returned time.Time
			err      error
		}
		out := make(chan waited, b.N)
		for _, r := range res {
			go func() {
				t, err := c.Wait(ctx, r.TaskID)
				out <- waited{t, time.Now(), err}
			}()
		}
		require.Eventually(b, func() bool { // every waiter registered in the database
			return scalar[int](b, c.Pool(), `select count(*)::int from queues.task_waiter`) == b.N
		}, time.Minute, 5*time.Millisecond)
		b.ResetTimer()
		start()
		lag := make([]time.Duration, 0, b.N)
		for range b.N {
			w := <-out
			if w.err != nil {
				b.Fatal(w.err)
			}
			lag = append(lag, lagOf(b, w.t, w.returned))
		}
		b.StopTimer()
		report(b, lag)
	})
}
