package taskorch_test

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/internal/testing/pgbouncertest"
)

// Behind a transaction pooler (a real PgBouncer in transaction mode), as docs/operations.md,
// "Production topology", tells a Go team to connect: default_query_exec_mode=exec in the URL
// (no named prepared statements), and the worker polls or LISTENs on a direct connection.

// pooledURL gives the test a migrated database and its URL through a PgBouncer in transaction
// mode, with pgx's exec mode, as the docs say.
func pooledURL(t *testing.T) (direct, pooled string, b *pgbouncertest.Bouncer) {
	t.Helper()
	direct = dbtest.NewDBURL(t)
	b = pgbouncertest.Start(t, direct, pgbouncertest.Options{})
	return direct, withExecMode(t, b.URL(direct)), b
}

func withExecMode(t *testing.T, u string) string {
	t.Helper()
	pu, err := url.Parse(u)
	require.NoError(t, err)
	q := pu.Query()
	q.Set("default_query_exec_mode", "exec")
	pu.RawQuery = q.Encode()
	return pu.String()
}

func poolFor(t *testing.T, u string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(u)
	require.NoError(t, err)
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// A poll-only worker and a client through the pooler: every task runs once, and the enqueues,
// reads and outcomes that go through it hold no session state.
func TestPoolerWorkerPollOnly(t *testing.T) {
	t.Parallel()
	_, pooled, _ := pooledURL(t)
	pool := poolFor(t, pooled, 16)
	client, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)

	var mu sync.Mutex
	runs := map[int64]int{}
	hs := taskorch.NewHandlers()
	hs.HandleFunc("pooled", func(_ context.Context, task *taskorch.Task) error {
		mu.Lock()
		defer mu.Unlock()
		runs[task.ID]++
		return nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, PollOnly: true, Concurrency: 8})

	const n = 300
	batch := make([]taskorch.EnqueueParams, n)
	for i := range batch {
		batch[i] = taskorch.EnqueueParams{Args: raw("pooled", `{}`)}
	}
	res, err := client.EnqueueMany(t.Context(), batch)
	require.NoError(t, err)
	for i := 0; i < 3; i++ { // reads through the pooler, more than once (no statement cache)
		_, err := client.Get(t.Context(), res[0].TaskID)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		return scalar[int64](t, pool, `select count(*) from queues.task where task_type = 'pooled' and status = 'completed'`) == n
	}, 60*time.Second, 20*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, runs, n)
	for id, c := range runs {
		require.Equal(t, 1, c, "task %d ran %d times", id, c)
	}
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.error`), "no refusal, no error")
}

// With a direct LISTEN connection, a worker whose work goes through the pooler wakes on NOTIFY:
// with a poll interval of a minute, only the notification can start the task within seconds.
func TestPoolerWorkerListensDirectly(t *testing.T) {
	t.Parallel()
	direct, pooled, _ := pooledURL(t)
	pool := poolFor(t, pooled, 8)
	listenCfg, err := pgx.ParseConfig(direct)
	require.NoError(t, err)
	started := make(chan struct{}, 1)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("woken", func(context.Context, *taskorch.Task) error {
		started <- struct{}{}
		return nil
	})
	obs := newCountingObserver()
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		Handlers: hs, ListenConfig: listenCfg, Concurrency: 2, Observers: []taskorch.Observer{obs},
		PollInterval: time.Minute, MaxPollInterval: time.Minute, Logger: testLogger(t),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-runErr })

	// An enqueue notifies only a worker that has said it waits (docs/worker.md, "The loop"):
	// enqueue once it has.
	require.Eventually(t, func() bool {
		return scalar[bool](t, pool, `select coalesce(pg_sequence_last_value('internal.task_waiter_seq'), 0)
			> coalesce(pg_sequence_last_value('internal.task_woken_seq'), 0)`)
	}, 10*time.Second, 10*time.Millisecond, "the worker never said it waits")
	client, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	_, err = client.Enqueue(t.Context(), raw("woken", `{}`), nil)
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the task did not start within 5s: the NOTIFY did not reach the worker")
	}
	// What proves the direct connection is the notification it received.
	require.Eventually(t, func() bool {
		return obs.notifications.Load() >= 1
	}, 5*time.Second, 10*time.Millisecond, "no NOTIFY received on the direct LISTEN connection")
}

// A LISTEN connection through the transaction pooler would never hear the pool's NOTIFY: the
// worker refuses to start, and says why.
func TestPoolerListenThroughPoolerRefused(t *testing.T) {
	t.Parallel()
	_, pooled, _ := pooledURL(t)
	pool := poolFor(t, pooled, 8)
	listenCfg, err := pgx.ParseConfig(pooled)
	require.NoError(t, err)
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{ListenConfig: listenCfg, Logger: testLogger(t)})
	require.NoError(t, err)
	err = w.Run(t.Context())
	require.ErrorIs(t, err, taskorch.ErrListenProbe)
	require.ErrorContains(t, err, "transaction-pooling proxy")
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.worker`), "nothing registered")

	_, err = taskorch.NewWorker(pool, &taskorch.WorkerConfig{ListenConfig: listenCfg, PollOnly: true})
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	require.ErrorContains(t, err, "exclude each other")
}

// Migrations through the pooler, from four processes at once: each applied once, and no
// advisory lock left behind on a server connection (a session lock taken through a transaction
// pooler can be released on another server connection, and then is never released).
func TestPoolerMigrateConcurrent(t *testing.T) {
	t.Parallel()
	direct := dbtest.NewEmptyDBURL(t)
	b := pgbouncertest.Start(t, direct, pgbouncertest.Options{PoolSize: 3})
	pooled := withExecMode(t, b.URL(direct))
	applied := make([][]string, 4)
	var g errgroup.Group
	for i := range applied {
		g.Go(func() error {
			p, err := pgxpool.New(t.Context(), pooled)
			if err != nil {
				return err
			}
			defer p.Close()
			applied[i], err = taskorch.Migrate(t.Context(), p, nil)
			return err
		})
	}
	require.NoError(t, g.Wait())
	var total []string
	for _, a := range applied {
		total = append(total, a...)
	}
	require.ElementsMatch(t, coreMigrationIDs(t), total, "every migration applied exactly once across the four callers")

	directPool := poolFor(t, direct, 2)
	require.Zero(t, scalar[int64](t, directPool,
		`select count(*) from pg_locks where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database())`),
		"no advisory lock held after the migrations")
}

// A pooler in session mode is a direct connection to the worker: prepared statements and
// LISTEN work as they are.
func TestPoolerSessionModeWorksAsDirect(t *testing.T) {
	t.Parallel()
	direct := dbtest.NewDBURL(t)
	b := pgbouncertest.Start(t, direct, pgbouncertest.Options{Mode: "session", PoolSize: 20})
	pool := poolFor(t, b.URL(direct), 12) // pgx's default: cached prepared statements
	started := make(chan struct{}, 1)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("session", func(context.Context, *taskorch.Task) error {
		started <- struct{}{}
		return nil
	})
	obs := newCountingObserver()
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Observers: []taskorch.Observer{obs}, Concurrency: 2,
		PollInterval: time.Minute, MaxPollInterval: time.Minute})
	// An enqueue notifies only a worker that has said it waits (docs/worker.md, "The loop"):
	// enqueue once it has.
	require.Eventually(t, func() bool {
		return scalar[bool](t, pool, `select coalesce(pg_sequence_last_value('internal.task_waiter_seq'), 0)
			> coalesce(pg_sequence_last_value('internal.task_woken_seq'), 0)`)
	}, 10*time.Second, 10*time.Millisecond, "the worker never said it waits")
	client, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	for range 3 {
		_, err = client.Enqueue(t.Context(), raw("session", `{}`), nil)
		require.NoError(t, err)
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("the task did not start within 5s")
		}
	}
	require.Eventually(t, func() bool {
		return obs.notifications.Load() >= 1
	}, 5*time.Second, 10*time.Millisecond, "no NOTIFY through the session pooler")
}

// The pooler killed and started again mid-run: the worker's connections drop, statements in
// flight fail, and the leases decide. Every task completes; none is lost.
func TestPoolerRestartedMidRun(t *testing.T) {
	t.Parallel()
	direct, pooled, b := pooledURL(t)
	pool := poolFor(t, pooled, 16)
	check := poolFor(t, direct, 2)
	var mu sync.Mutex
	runs := map[int64]int{}
	hs := taskorch.NewHandlers()
	hs.HandleFunc("through.restart", func(ctx context.Context, task *taskorch.Task) error {
		mu.Lock()
		runs[task.ID]++
		mu.Unlock()
		select { // 20 ms of work: a restart lands with tasks running
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, PollOnly: true, Concurrency: 8, LeaseDuration: 2 * time.Second})
	client, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	const n = 400
	batch := make([]taskorch.EnqueueParams, n)
	for i := range batch {
		batch[i] = taskorch.EnqueueParams{Args: raw("through.restart", `{}`)}
	}
	_, err = client.EnqueueMany(t.Context(), batch)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return scalar[int64](t, check, `select count(*) from queues.task where status = 'completed'`) >= 50
	}, 30*time.Second, 5*time.Millisecond)
	b.Stop()
	b.StartAgain()
	require.Eventually(t, func() bool {
		return scalar[int64](t, check, `select count(*) from queues.task where task_type = 'through.restart' and status = 'completed'`) == n
	}, 90*time.Second, 20*time.Millisecond, "every task completes after the pooler's restart")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, runs, n, "every task ran")
	again := 0
	for _, c := range runs {
		again += c - 1
	}
	t.Logf("%d of %d tasks ran again after the restart (their outcome was lost with the connection; the lease expired)", again, n)
}
