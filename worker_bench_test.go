package taskorch_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// BenchmarkWorkerThroughput: b.N no-op Go-handler tasks bulk-enqueued, then worked by one worker
// (one op is one task, from the worker's start to the last completion).
func BenchmarkWorkerThroughput(b *testing.B) {
	for _, conc := range []int{50, 200} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			ctx := context.Background()
			pool := dbtest.NewDBWith(b, dbtest.DBOptions{MaxConns: 16})
			mustExec(b, pool, `select queues.enqueue_many(array_fill('noop'::text, array[$1::int]), array_fill('{}'::jsonb, array[$1::int]))`, b.N)
			mustExec(b, pool, `analyze queues.task`)
			var done atomic.Int64
			all := make(chan struct{})
			hs := taskorch.NewHandlers()
			hs.HandleFunc("noop", func(context.Context, *taskorch.Task) error {
				if done.Add(1) == int64(b.N) {
					close(all)
				}
				return nil
			})
			w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{Logger: quiet, Handlers: hs, Concurrency: conc, FetchBatch: min(conc, 500)})
			require.NoError(b, err)
			wctx, stop := context.WithCancel(ctx)
			stopped := make(chan struct{})
			b.ResetTimer()
			go func() { defer close(stopped); _ = w.Run(wctx) }()
			<-all
			b.StopTimer()
			stop()
			<-stopped // the last completions are flushed before Run returns
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
			require.Equal(b, int64(b.N), scalar[int64](b, pool, `select count(*) from queues.task where status = 'completed'`))
		})
	}
}

// BenchmarkWorkerLatency: on an idle worker woken by NOTIFY, the time from enqueue (before the
// enqueuing statement is sent) to the handler starting, one task at a time. Reports p50 and p99.
func BenchmarkWorkerLatency(b *testing.B) {
	ctx := context.Background()
	pool := dbtest.NewDBWith(b, dbtest.DBOptions{MaxConns: 16})
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(b, err)
	started := make(chan time.Time, 1)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("ping", func(context.Context, *taskorch.Task) error { started <- time.Now(); return nil })
	// A long poll interval: wake-ups come from NOTIFY, not from polling.
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{Logger: quiet, Handlers: hs, PollInterval: 5 * time.Second, MaxPollInterval: 5 * time.Second})
	require.NoError(b, err)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = w.Run(wctx) }()
	// Warm up: the worker is listening once a task gets through.
	_, err = c.Enqueue(ctx, raw("ping", `{}`), nil)
	require.NoError(b, err)
	<-started

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := c.Enqueue(ctx, raw("ping", `{}`), nil); err != nil {
			b.Fatal(err)
		}
		t1 := <-started
		lat = append(lat, t1.Sub(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

// quiet keeps the worker's logs out of benchmark output.
var quiet = slog.New(slog.DiscardHandler)
