package taskorch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// Worker.Stop is the first SIGTERM: the running task finishes (the grace is long), the worker
// claims nothing more, Stop returns once Run has, and the pool is the caller's: every connection
// the worker acquired is back in it, and Run may not run again.
func TestWorkerStopFinishesRunningTasks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	started, release := make(chan struct{}), make(chan struct{})
	hs := taskorch.NewHandlers()
	hs.HandleFunc("stop_finish", func(context.Context, *taskorch.Task) error {
		close(started)
		<-release
		return nil
	})
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{Handlers: hs, ShutdownGrace: time.Hour, Logger: testLogger(t),
		PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond})
	require.NoError(t, err)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(context.Background()) }()

	first, err := c.Enqueue(ctx, raw("stop_finish", `{}`), nil)
	require.NoError(t, err)
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(context.Background()) }()
	// Stop has begun or is about to: what is enqueued now is not run, or is given back.
	second, err := c.Enqueue(ctx, raw("stop_finish", `{}`), nil)
	require.NoError(t, err)
	select {
	case <-w.Stopped():
		t.Fatal("the worker stopped while its task was still running, within the grace")
	default:
	}
	close(release)

	require.NoError(t, <-stopped)
	require.NoError(t, <-ran)
	select {
	case <-w.Stopped():
	default:
		t.Fatal("Stopped is not closed after Stop returned")
	}
	require.Equal(t, "completed", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, first.TaskID))
	require.Equal(t, "pending", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, second.TaskID))
	require.Zero(t, scalar[int](t, pool, `select attempt from queues.task where task_id = $1`, second.TaskID), "given back: no attempt spent")
	// Every connection the worker acquired is given back. One whose statement the stop
	// interrupted is closed by the pool in the background (pgx sends the server a cancel request
	// first), and counts as acquired until then: a leak would never reach zero.
	require.Eventually(t, func() bool { return pool.Stat().AcquiredConns() == 0 }, 20*time.Second, 5*time.Millisecond,
		"the worker gave back every connection it acquired")
	// The two it took out of the pool (its session, its LISTEN connection) are closed: the
	// database's backends are the pool's idle connections (a closed backend exits shortly after).
	require.Eventually(t, func() bool {
		n := scalar[int32](t, pool, `select count(*)::int from pg_stat_activity where datname = current_database()`)
		return n == pool.Stat().TotalConns()
	}, 20*time.Second, 10*time.Millisecond, "a connection the worker took out of the pool is still open")

	require.NoError(t, w.Stop(ctx), "Stop after Run returned does nothing")
	require.ErrorIs(t, w.Run(ctx), taskorch.ErrRunAgain)
}

// A Stop whose context ends first cuts the grace short, as HardStop does: the running task is
// cancelled and given back, and Stop returns the context's error without waiting for Run.
func TestWorkerStopContextCutsTheGraceShort(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	started := make(chan struct{})
	hs := taskorch.NewHandlers()
	hs.HandleFunc("stop_hold", func(ctx context.Context, _ *taskorch.Task) error {
		close(started)
		<-ctx.Done()
		return context.Cause(ctx)
	})
	w, _ := startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, ShutdownGrace: time.Hour})
	res, err := c.Enqueue(ctx, raw("stop_hold", `{}`), nil)
	require.NoError(t, err)
	<-started

	gone, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, w.Stop(gone), context.Canceled)
	<-w.Stopped()
	require.Equal(t, "pending", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, res.TaskID),
		"the cancelled task was given back")
}

// Stop before Run keeps the worker from starting.
func TestWorkerStopBeforeRun(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{Handlers: taskorch.NewHandlers(), Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, w.Stop(t.Context()))
	<-w.Stopped()
	require.ErrorIs(t, w.Run(t.Context()), taskorch.ErrRunAgain)
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.worker`), "it never registered")
}
