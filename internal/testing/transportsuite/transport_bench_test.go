package transportsuite_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/internal/testing/redistest"
	"github.com/taskorch/taskorch/internal/testing/sqstest"
	"github.com/taskorch/taskorch/transport/redisstream"
	"github.com/taskorch/taskorch/transport/sqs"
)

// The transports side by side, in one run (the machine is shared: compare the ratios, not the
// absolute figures): postgres (LISTEN/NOTIFY and polling), redis (a real redis-server) and sqs
// (the local server of internal/testing/sqstest, through the real AWS SDK). docs/transports.md quotes
// them.

// benchTransport sets cfg up for the named transport (postgres: nothing to do).
func benchTransport(b *testing.B, name string, cfg *taskorch.WorkerConfig) {
	b.Helper()
	switch name {
	case redisstream.Name:
		srv := redistest.Start(b)
		tr, err := redisstream.New(redisstream.Config{URL: srv.URL(0)})
		require.NoError(b, err)
		cfg.Transport = tr
	case sqs.Name:
		srv := sqstest.Start(b)
		url := srv.CreateQueue("tasks", 30*time.Second)
		tr, err := sqs.New(b.Context(), sqs.Config{QueueURL: url, Endpoint: srv.URL, Region: "us-east-1",
			Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), Wait: 5 * time.Second})
		require.NoError(b, err)
		cfg.Transport = tr
	}
}

var benchTransports = []string{"postgres", redisstream.Name, sqs.Name}

// BenchmarkTransportThroughput: b.N no-op tasks bulk-enqueued, then worked by one worker of
// concurrency 50 (one op is one task, from the worker's start to the last completion).
func BenchmarkTransportThroughput(b *testing.B) {
	for _, name := range benchTransports {
		b.Run("transport="+name, func(b *testing.B) {
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
			cfg := taskorch.WorkerConfig{Logger: quiet, Handlers: hs, Concurrency: 50}
			benchTransport(b, name, &cfg)
			w, err := taskorch.NewWorker(pool, &cfg)
			require.NoError(b, err)
			wctx, stop := context.WithCancel(ctx)
			stopped := make(chan struct{})
			b.ResetTimer()
			go func() { defer close(stopped); _ = w.Run(wctx) }()
			<-all
			b.StopTimer()
			stop()
			<-stopped
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
			require.Equal(b, int64(b.N), scalar[int64](b, pool, `select count(*) from queues.task where status = 'completed'`))
		})
	}
}

// BenchmarkTransportLatency: on an idle worker, the time from enqueue (before the enqueuing
// statement is sent) to the handler starting, one task at a time. With redis and sqs the path
// is NOTIFY → the dispatcher marks and sends the id → the worker receives and claims it.
func BenchmarkTransportLatency(b *testing.B) {
	for _, name := range benchTransports {
		b.Run("transport="+name, func(b *testing.B) {
			ctx := context.Background()
			pool := dbtest.NewDBWith(b, dbtest.DBOptions{MaxConns: 16})
			c, err := taskorch.NewClient(pool, nil)
			require.NoError(b, err)
			started := make(chan time.Time, 1)
			hs := taskorch.NewHandlers()
			hs.HandleFunc("ping", func(context.Context, *taskorch.Task) error { started <- time.Now(); return nil })
			// A long poll interval: wake-ups come from NOTIFY and the transport, not from polling.
			cfg := taskorch.WorkerConfig{Logger: quiet, Handlers: hs, PollInterval: 5 * time.Second, MaxPollInterval: 5 * time.Second}
			benchTransport(b, name, &cfg)
			w, err := taskorch.NewWorker(pool, &cfg)
			require.NoError(b, err)
			wctx, stop := context.WithCancel(ctx)
			stopped := make(chan struct{})
			defer func() { stop(); <-stopped }()
			go func() { defer close(stopped); _ = w.Run(wctx) }()
			_, err = c.Enqueue(ctx, raw("ping", `{}`), nil) // warm up
			require.NoError(b, err)
			<-started

			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				if _, err := c.Enqueue(ctx, raw("ping", `{}`), nil); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, (<-started).Sub(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
		})
	}
}
