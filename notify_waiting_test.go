package taskorch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// queues.worker_waiting answers false while an enqueue that began before it is still in flight
// (its task may commit after the worker's claim without a notification), and true once that
// transaction has ended, committed or not. It takes nothing it keeps: an enqueue after it,
// even while the caller's transaction stays open, goes through at once.
func TestWorkerWaitingSeesEnqueuesInFlight(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := dbtest.NewDBURL(t)
	connect := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	app, worker := connect(), connect()
	waiting := func() bool { return scalar[bool](t, worker, `select queues.worker_waiting()`) }
	require.True(t, waiting(), "nothing in flight")

	for _, end := range []string{"commit", "rollback"} {
		tx, err := app.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `select queues.enqueue('n', '{}')`)
		require.NoError(t, err)
		require.False(t, waiting(), "an enqueue is in flight (%s next)", end)
		require.False(t, waiting(), "still in flight (%s next)", end)
		_, err = tx.Exec(ctx, end)
		require.NoError(t, err)
		require.True(t, waiting(), "after %s", end)
	}

	// A raw insert by the schema's owner is an enqueue in flight too (the trigger takes the
	// lock), and so is an enqueue that inserted nothing new (a duplicate key).
	for _, sql := range []string{
		`insert into queues.task (task_type, payload) values ('n', '{}')`,
		`select queues.enqueue('n', '{}', now(), 0, 'key')`,
	} {
		mustExec(t, app, sql) // the first time, outside a transaction
		tx, err := app.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, sql)
		require.NoError(t, err)
		require.False(t, waiting(), sql)
		require.NoError(t, tx.Rollback(ctx))
		require.True(t, waiting(), sql)
	}

	// Called inside a transaction that stays open, it holds nothing an enqueue waits for.
	tx, err := worker.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	require.True(t, scalar[bool](t, tx, `select queues.worker_waiting()`))
	mustExec(t, app, `set lock_timeout = '5s'`)
	mustExec(t, app, `select queues.enqueue('n', '{}')`)
	mustExec(t, app, `select queues.enqueue_many(array['n', 'n'], array['{}'::jsonb, '{}'::jsonb])`)
}

// The race between a worker going idle and an enqueue that commits at that moment: the
// enqueue's statement ran while the worker was busy (no worker waited, so it did not notify),
// and its transaction commits after the worker's last claim, which could not see it. The worker
// must still start the task within PollInterval of the commit (docs/worker.md, "The loop"),
// although its poll would otherwise have backed off towards MaxPollInterval (a minute here).
// The enqueue's transaction stays open for several poll intervals after the worker went idle,
// as an application's transaction that enqueues and then does more work.
func TestIdleWorkerStartsRacingEnqueueWithinPollInterval(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pool := dbtest.NewDB(t)
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)

	const poll = 500 * time.Millisecond
	release := make(chan struct{})
	var mu sync.Mutex
	started := map[int64]time.Time{}
	hs := taskorch.NewHandlers()
	hs.HandleFunc("hold", func(ctx context.Context, _ *taskorch.Task) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	hs.HandleFunc("probe", func(_ context.Context, task *taskorch.Task) error {
		mu.Lock()
		defer mu.Unlock()
		started[task.ID] = time.Now()
		return nil
	})
	startedAt := func(id int64) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		at, ok := started[id]
		return at, ok
	}
	// One slot and no claiming ahead: while the held task runs, the worker claims nothing, and
	// so does not say it waits.
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Concurrency: 1, ClaimAhead: -1,
		PollInterval: poll, MaxPollInterval: time.Minute})
	announced := func() int64 {
		return scalar[int64](t, pool, `select coalesce(pg_sequence_last_value('internal.task_waiter_seq'), 0)`)
	}
	answered := func() int64 {
		return scalar[int64](t, pool, `select coalesce(pg_sequence_last_value('internal.task_woken_seq'), 0)`)
	}

	hold, err := c.Enqueue(ctx, raw("hold", `{}`), nil)
	require.NoError(t, err)
	waitStatus(t, pool, hold.TaskID, taskorch.StatusRunning)
	// A probe answers the worker's last announcement: from here on no worker waits unanswered.
	first, err := c.Enqueue(ctx, raw("probe", `{}`), nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return answered() >= announced() }, 10*time.Second, 5*time.Millisecond)

	// The racing enqueue: its statement finds no worker waiting, and does not notify.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	racing, err := c.EnqueueTx(ctx, tx, raw("probe", `{}`), nil)
	require.NoError(t, err)
	before := announced()

	// The worker finishes the held task, runs the first probe, finds nothing more (the racing
	// task is not committed) and says it waits.
	close(release)
	waitStatus(t, pool, first.TaskID, taskorch.StatusCompleted)
	require.Eventually(t, func() bool { return announced() > before }, 10*time.Second, 5*time.Millisecond)
	// The transaction goes on for several poll intervals: a worker backing off from PollInterval
	// would have polled at 1, 3 and 7 intervals, and poll next at 15.
	time.Sleep(8 * poll) //nolint:forbidigo // the application's transaction doing its other work: the scenario, not a wait for a condition
	_, ok := startedAt(racing.TaskID)
	require.False(t, ok, "the task started before its transaction committed")
	require.NoError(t, tx.Commit(ctx))
	committed := time.Now()

	// Started within PollInterval of the commit, plus what a claim takes on a loaded machine.
	const slack = 1500 * time.Millisecond
	var at time.Time
	require.Eventually(t, func() bool { at, ok = startedAt(racing.TaskID); return ok }, 30*time.Second, 5*time.Millisecond,
		"the racing task was never started")
	require.LessOrEqual(t, at.Sub(committed), poll+slack,
		"started %s after its commit; the bound is PollInterval (%s)", at.Sub(committed), poll)
}

// A worker that is idle and waiting is woken by the next enqueue's notification, not by its
// poll: with a poll interval of a minute, each of several tasks enqueued one after another (a
// task every time the last has started, so the worker is idle each time) starts within
// seconds.
func TestIdleWorkerIsWokenByNotification(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pool := dbtest.NewDB(t)
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	ran := make(chan int64, 1)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("n", func(_ context.Context, task *taskorch.Task) error {
		ran <- task.ID
		return nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, PollInterval: time.Minute, MaxPollInterval: time.Minute})
	for i := range 5 {
		// The worker waits: it has said so (its first claim, or the one after the last task).
		require.Eventually(t, func() bool {
			return scalar[bool](t, pool, `select coalesce(pg_sequence_last_value('internal.task_waiter_seq'), 0)
				> coalesce(pg_sequence_last_value('internal.task_woken_seq'), 0)`)
		}, 20*time.Second, 5*time.Millisecond, "task %d: the worker never said it waits", i)
		res, err := c.Enqueue(ctx, raw("n", `{}`), nil)
		require.NoError(t, err)
		select {
		case id := <-ran:
			require.Equal(t, res.TaskID, id)
		case <-time.After(20 * time.Second):
			t.Fatalf("task %d was not started within 20 s with a poll interval of a minute: no wake-up", i)
		}
	}
}
