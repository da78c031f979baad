package transportsuite_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	taskorchprom "github.com/taskorch/taskorch/contrib/prometheus"
	"github.com/taskorch/taskorch/internal/dispatch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/internal/testing/redistest"
	"github.com/taskorch/taskorch/internal/testing/sqstest"
	"github.com/taskorch/taskorch/transport"
	"github.com/taskorch/taskorch/transport/redisstream"
	"github.com/taskorch/taskorch/transport/sqs"
)

// transportRig makes the transports of one test's workers, all on one Redis stream or one SQS
// queue, and says what faults it injected.
type transportRig struct {
	name   string
	make   func(t *testing.T, workerID string) transport.Transport
	faults func() string
}

const rigLease = 30 * time.Second

// redisRig: a real redis-server; faults injected at send by dispatch.Faults around the real
// transport.
func redisRig(t *testing.T, faults dispatch.FaultConfig) (*transportRig, *redistest.Server) {
	srv := redistest.Start(t)
	var mu sync.Mutex
	var all []*dispatch.Faults
	rig := &transportRig{name: redisstream.Name}
	rig.make = func(t *testing.T, _ string) transport.Transport {
		tr, err := redisstream.New(redisstream.Config{URL: srv.URL(0), Block: 200 * time.Millisecond})
		require.NoError(t, err)
		f := faults
		mu.Lock()
		defer mu.Unlock()
		f.Seed = uint64(len(all) + 1)
		ft := dispatch.NewFaults(t.Context(), tr, f)
		all = append(all, ft)
		return ft
	}
	rig.faults = func() string {
		mu.Lock()
		defer mu.Unlock()
		var c dispatch.FaultCounts
		for _, f := range all {
			n := f.Counts()
			c.Sent, c.Dropped, c.Duplicated, c.Delayed = c.Sent+n.Sent, c.Dropped+n.Dropped, c.Duplicated+n.Duplicated, c.Delayed+n.Delayed
		}
		return fmt.Sprintf("injected at send: %d dropped, %d duplicated, %d delayed", c.Dropped, c.Duplicated, c.Delayed)
	}
	return rig, srv
}

// sqsRig: the local SQS server, spoken to by the real AWS SDK; faults injected by the server.
func sqsRig(t *testing.T, faults sqstest.Faults) *transportRig {
	srv := sqstest.Start(t)
	srv.SetFaults(faults)
	queueURL := srv.CreateQueue("tasks", 30*time.Second)
	creds := credentials.NewStaticCredentialsProvider("test", "test", "")
	return &transportRig{
		name: sqs.Name,
		make: func(t *testing.T, _ string) transport.Transport {
			tr, err := sqs.New(t.Context(), sqs.Config{QueueURL: queueURL, Endpoint: srv.URL, Region: "us-east-1",
				Credentials: creds, Wait: time.Second})
			require.NoError(t, err)
			return tr
		},
		faults: func() string {
			c := srv.Counts()
			return fmt.Sprintf("injected by the server: %d dropped, %d duplicated, %d delayed (%d sent, %d received, %d redelivered)",
				c.Dropped, c.Duplicated, c.Delayed, c.Sent, c.Received, c.Redelivered)
		},
	}
}

// transportWorker starts a worker on the rig's transport with its own metrics registry.
func transportWorker(t *testing.T, pool *pgxpool.Pool, rig *transportRig, id string, cfg taskorch.WorkerConfig) (*prometheus.Registry, func()) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.ID = id
	cfg.Observers = append(cfg.Observers, taskorchprom.New(reg))
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = rigLease
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
		cfg.MaxPollInterval = 200 * time.Millisecond
	}
	cfg.Transport = rig.make(t, id)
	_, stop := startWorker(t, pool, &cfg)
	return reg, stop
}

// metricSum sums a metric over registries.
func metricSum(t *testing.T, name string, regs ...*prometheus.Registry) float64 {
	t.Helper()
	var sum float64
	for _, reg := range regs {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// Per transport: 20,000 tasks through 4 workers while messages are duplicated, dropped and
// delayed. Every task is completed exactly once (one lease, one completion, one handler run);
// the dropped ones are recovered by the reclaimer; duplicates are refused at the claim.
func TestTransportExactlyOnceUnderFaults(t *testing.T) {
	t.Parallel()
	rigs := map[string]func(t *testing.T) *transportRig{
		redisstream.Name: func(t *testing.T) *transportRig {
			rig, _ := redisRig(t, dispatch.FaultConfig{Drop: 0.01, Duplicate: 0.05, Delay: 0.02, DelayBy: 300 * time.Millisecond})
			return rig
		},
		sqs.Name: func(t *testing.T) *transportRig {
			return sqsRig(t, sqstest.Faults{Drop: 0.01, Duplicate: 0.05, Delay: 0.02, DelayBy: 300 * time.Millisecond, Seed: 1})
		},
	}
	for name, mkRig := range rigs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tasks, workers := int64(20000), 4
			if raceEnabled {
				tasks = 4000 // the same faults and checks; the race detector slows the worker ~5x
			}
			rig := mkRig(t)
			pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 32})

			var runs sync.Map // task id -> *atomic.Int32
			hs := taskorch.NewHandlers()
			hs.HandleFunc("noop", func(_ context.Context, task *taskorch.Task) error {
				n, _ := runs.LoadOrStore(task.ID, new(atomic.Int32))
				n.(*atomic.Int32).Add(1)
				return nil
			})
			var regs []*prometheus.Registry
			for i := range workers {
				reg, _ := transportWorker(t, pool, rig, fmt.Sprintf("%s-w%d", name, i), taskorch.WorkerConfig{
					Handlers: hs, Concurrency: 16, RedispatchAfter: time.Second,
				})
				regs = append(regs, reg)
			}
			start := time.Now()
			for range tasks / 1000 {
				mustExec(t, pool, `select queues.enqueue_many(array_fill('noop'::text, array[1000]), array_fill('{}'::jsonb, array[1000]))`)
			}
			// Lost tasks show as completions that stop short of the total; a slow machine only
			// makes them come slower.
			waitProgress(t, 30*time.Second, tasks, "every task completed", func() int64 {
				return scalar[int64](t, pool, `select count(*) from queues.task where status = 'completed'`)
			})
			elapsed := time.Since(start)

			require.Equal(t, int64(tasks), scalar[int64](t, pool, `select count(*) from queues.task_lease`), "each task claimed once")
			ran := int64(0)
			runs.Range(func(_, v any) bool {
				require.Equal(t, int32(1), v.(*atomic.Int32).Load(), "a handler ran twice")
				ran++
				return true
			})
			require.Equal(t, tasks, ran)

			redispatched := scalar[int64](t, pool, `select count(*) from queues.task_event where event = 'redispatched'`)
			refused := metricSum(t, "taskorch_transport_duplicates_refused_total", regs...)
			received := metricSum(t, "taskorch_transport_messages_received_total", regs...)
			t.Logf("%s: %d tasks through %d workers in %s (%.0f tasks/s); %s; %d lost messages recovered by the reclaimer (redispatched events); %.0f messages received, %.0f duplicates refused at the claim",
				name, tasks, workers, elapsed.Round(time.Millisecond), float64(tasks)/elapsed.Seconds(), rig.faults(), redispatched, received, refused)
			require.Positive(t, redispatched, "dropped messages were recovered by the reclaimer")
			require.Positive(t, refused, "duplicates were refused at the claim")
			require.Zero(t, metricSum(t, "taskorch_transport_fallback", regs...), "the transport stayed up")
		})
	}
}

// Redis stopped mid-run and started again (empty: no persistence): nothing is lost, each task is
// completed once; the workers carried on through PostgreSQL meanwhile (fallback gauge, tasks
// enqueued during the outage completed), and went back to Redis after it.
func TestTransportRedisRestart(t *testing.T) {
	t.Parallel()
	rig, srv := redisRig(t, dispatch.FaultConfig{})
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 16})
	hs := taskorch.NewHandlers()
	hs.HandleFunc("slow", func(ctx context.Context, _ *taskorch.Task) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
			return nil
		}
	})
	var regs []*prometheus.Registry
	for i := range 2 {
		reg, _ := transportWorker(t, pool, rig, fmt.Sprintf("w%d", i), taskorch.WorkerConfig{Handlers: hs, Concurrency: 8, RedispatchAfter: 2 * time.Second})
		regs = append(regs, reg)
	}
	enqueue := func(n int) {
		mustExec(t, pool, `select queues.enqueue_many(array_fill('slow'::text, array[$1::int]), array_fill('{}'::jsonb, array[$1::int]))`, n)
	}
	completed := func() int64 {
		return scalar[int64](t, pool, `select count(*) from queues.task where status = 'completed'`)
	}

	enqueue(2000)
	require.Eventually(t, func() bool { return completed() >= 200 }, 30*time.Second, 10*time.Millisecond, "work under way over Redis")
	receivedBefore := metricSum(t, "taskorch_transport_messages_received_total", regs...)
	require.Positive(t, receivedBefore)

	srv.Stop()
	require.Eventually(t, func() bool { return metricSum(t, "taskorch_transport_fallback", regs...) == 2 }, 30*time.Second, 10*time.Millisecond,
		"both workers fell back to PostgreSQL")
	during := completed()
	enqueue(1000) // enqueued while Redis is down: only PostgreSQL can deliver these
	require.Eventually(t, func() bool { return completed() >= during+500 }, 30*time.Second, 10*time.Millisecond, "work goes on through PostgreSQL")

	srv.StartAgain()
	require.Eventually(t, func() bool { return metricSum(t, "taskorch_transport_fallback", regs...) == 0 }, 30*time.Second, 10*time.Millisecond,
		"both workers went back to Redis")
	enqueue(1000)
	require.Eventually(t, func() bool { return completed() == 4000 }, 45*time.Second, 20*time.Millisecond, "every task completed")
	require.Greater(t, metricSum(t, "taskorch_transport_messages_received_total", regs...), receivedBefore, "tasks came over Redis again")
	require.Equal(t, int64(4000), scalar[int64](t, pool, `select count(*) from queues.task_lease`), "each task claimed once")
}

// A task dispatched to a transport that does not answer is not lost: the send fails, the mark is
// cleared, and the worker claims it from PostgreSQL.
func TestTransportUnreachableAtStart(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 8})
	hs := taskorch.NewHandlers()
	hs.HandleFunc("noop", func(context.Context, *taskorch.Task) error { return nil })
	reg := prometheus.NewRegistry()
	tr, err := redisstream.New(redisstream.Config{URL: "redis://127.0.0.1:1/0"})
	require.NoError(t, err)
	_, _ = startWorker(t, pool, &taskorch.WorkerConfig{
		Handlers: hs, Transport: tr, Observers: []taskorch.Observer{taskorchprom.New(reg)},
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	res, err := c.Enqueue(t.Context(), raw("noop", `{}`), nil)
	require.NoError(t, err)
	waitStatus(t, pool, res.TaskID, taskorch.StatusCompleted)
	require.Equal(t, float64(1), metricSum(t, "taskorch_transport_fallback", reg))
	require.Equal(t, "redis", scalar[string](t, pool, `select transport from queues.worker`))
}

// A worker's transport is checked when the worker is made, not at the first message: a nil
// pointer, a nameless transport, one named as the PostgreSQL delivery. (The settings of the
// transports themselves are checked by their constructors: redisstream and sqs TestConfig, and
// the taskorch command's TestWorkerTransportFlags.)
func TestTransportConfig(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	var nilRedis *redisstream.Transport
	var nilSQS *sqs.Transport
	for _, tc := range []struct {
		cfg  taskorch.WorkerConfig
		want string
	}{
		{taskorch.WorkerConfig{Transport: nilRedis}, "nil *redisstream.Transport"},
		{taskorch.WorkerConfig{Transport: nilSQS}, "nil *sqs.Transport"},
		{taskorch.WorkerConfig{Transport: named{name: "kafka"}}, ""},
		{taskorch.WorkerConfig{Transport: named{name: ""}}, "empty name"},
		{taskorch.WorkerConfig{Transport: named{name: "postgres"}}, `named "postgres"`},
		{taskorch.WorkerConfig{Transport: named{name: "redis"}, RedispatchAfter: time.Nanosecond}, "redispatch-after"},
		{taskorch.WorkerConfig{RedispatchAfter: time.Nanosecond}, "redispatch-after"},
	} {
		_, err := taskorch.NewWorker(pool, &tc.cfg)
		if tc.want == "" {
			require.NoError(t, err)
			continue
		}
		require.ErrorContains(t, err, tc.want)
		var ie *taskorch.InputError
		require.ErrorAs(t, err, &ie)
	}
}

// named is a transport that only has a name: enough for NewWorker.
type named struct {
	transport.Transport
	name string
}

func (n named) Name() string { return n.name }

// The worker opens its transport with its id and a hold longer than its lease, and records
// the transport's name; a transport opened already stops Run with a clear error.
func TestTransportOpen(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 8})
	srv := redistest.Start(t)
	tr, err := redisstream.New(redisstream.Config{URL: srv.URL(0), Block: 200 * time.Millisecond})
	require.NoError(t, err)
	rec := &recordOpen{Transport: tr}
	_, _ = startWorker(t, pool, &taskorch.WorkerConfig{ID: "w-open", Transport: rec, LeaseDuration: 40 * time.Second,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	require.Eventually(t, func() bool {
		return scalar[int64](t, pool, `select count(*) from queues.worker where worker_id = 'w-open' and transport = 'redis'`) == 1
	}, 10*time.Second, 10*time.Millisecond)
	opts := rec.get()
	require.Equal(t, "w-open", opts.Consumer)
	require.Equal(t, 44*time.Second, opts.Hold, "the lease and a tenth")
	require.NotNil(t, opts.Logger)

	// The same transport for a second worker: Run fails at once, saying why.
	w2, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{ID: "w-two", Transport: tr})
	require.NoError(t, err)
	err = w2.Run(t.Context())
	require.ErrorContains(t, err, "already open")
	require.ErrorContains(t, err, `"w-open"`)
}

// recordOpen records the options its transport was opened with.
type recordOpen struct {
	transport.Transport
	mu   sync.Mutex
	opts transport.OpenOptions
}

func (r *recordOpen) Open(ctx context.Context, opts transport.OpenOptions) error {
	r.mu.Lock()
	r.opts = opts
	r.mu.Unlock()
	return r.Transport.Open(ctx, opts)
}

func (r *recordOpen) get() transport.OpenOptions {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.opts
}
