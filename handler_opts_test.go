package taskorch_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// Options are registered with the handler, at most one set; bad ones are found at start-up.
func TestHandlerOptsRegistration(t *testing.T) {
	t.Parallel()
	noop := func(context.Context, *taskorch.Task) error { return nil }
	hs := taskorch.NewHandlers()
	hs.HandleFunc("plain", noop)
	hs.HandleFunc("nil_opts", noop, nil)
	hs.HandleFunc("timed", noop, &taskorch.HandlerOpts{Timeout: time.Minute, MaxAttempts: 3})
	taskorch.AddHandler(hs, func(context.Context, *taskorch.TaskFor[greet]) error { return nil },
		&taskorch.HandlerOpts{MaxAttempts: 2})

	for typ, want := range map[string]taskorch.HandlerOpts{
		"plain":    {},
		"nil_opts": {},
		"timed":    {Timeout: time.Minute, MaxAttempts: 3},
		"greet":    {MaxAttempts: 2},
	} {
		got, ok := hs.HandlerOptsFor(typ)
		require.True(t, ok, typ)
		require.Equal(t, want, got, typ)
	}
	require.PanicsWithValue(t, `taskorch: handler of "two" given 2 *HandlerOpts; pass at most one`, func() {
		hs.HandleFunc("two", noop, &taskorch.HandlerOpts{}, &taskorch.HandlerOpts{})
	})
	require.PanicsWithValue(t, `taskorch: handler options of "neg": MaxAttempts must not be negative, got -1`, func() {
		hs.HandleFunc("neg", noop, &taskorch.HandlerOpts{MaxAttempts: -1})
	})
}

// Timeout replaces the worker's TaskTimeout for its type: a bound where the worker has none,
// another bound, or (negative) none at all.
func TestHandlerOptsTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	deadlines := make(chan time.Duration, 3) // the time left on the handler's context; -1: no deadline
	reportDeadline := func(ctx context.Context, _ *taskorch.Task) error {
		d := time.Duration(-1)
		if at, ok := ctx.Deadline(); ok {
			d = time.Until(at)
		}
		deadlines <- d
		return nil
	}
	hs := taskorch.NewHandlers()
	hs.HandleFunc("hangs", func(ctx context.Context, _ *taskorch.Task) error { <-ctx.Done(); return ctx.Err() },
		&taskorch.HandlerOpts{Timeout: 100 * time.Millisecond})
	hs.HandleFunc("unbounded", reportDeadline, &taskorch.HandlerOpts{Timeout: -1})
	hs.HandleFunc("longer", reportDeadline, &taskorch.HandlerOpts{Timeout: time.Hour})
	hs.HandleFunc("worker_default", reportDeadline)
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, TaskTimeout: 10 * time.Minute})

	hangs, err := c.Enqueue(ctx, raw("hangs", `{}`), &taskorch.EnqueueOpts{MaxAttempts: 1})
	require.NoError(t, err)
	waitStatus(t, pool, hangs.TaskID, taskorch.StatusDead)
	require.Contains(t, lastError(t, pool, hangs.TaskID), "timed out after 100ms")

	for typ, check := range map[string]func(d time.Duration){
		"unbounded":      func(d time.Duration) { require.Equal(t, time.Duration(-1), d, "no deadline at all") },
		"longer":         func(d time.Duration) { require.Greater(t, d, 50*time.Minute) },
		"worker_default": func(d time.Duration) { require.InDelta(t, float64(10*time.Minute), float64(d), float64(time.Minute)) },
	} {
		res, err := c.Enqueue(ctx, raw(typ, `{}`), nil)
		require.NoError(t, err)
		check(<-deadlines)
		waitStatus(t, pool, res.TaskID, taskorch.StatusCompleted)
	}
}

// MaxAttempts caps the attempts of its type below the task's own: a retriable failure at the cap
// ends the task dead, and a task claimed past the cap (its lease expired) ends dead unrun.
func TestHandlerOptsMaxAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	noRetryDelay(t, pool)
	var runs, expiredRuns atomic.Int32
	hs := taskorch.NewHandlers()
	hs.HandleFunc("capped", func(context.Context, *taskorch.Task) error {
		return fmt.Errorf("run %d failed", runs.Add(1))
	}, &taskorch.HandlerOpts{MaxAttempts: 2})
	hs.HandleFunc("capped_expired", func(context.Context, *taskorch.Task) error {
		expiredRuns.Add(1)
		return nil
	}, &taskorch.HandlerOpts{MaxAttempts: 1})
	hs.HandleFunc("capped_above", func(context.Context, *taskorch.Task) error {
		return errors.New("always")
	}, &taskorch.HandlerOpts{MaxAttempts: 10})

	expired, err := c.Enqueue(ctx, raw("capped_expired", `{}`), nil)
	require.NoError(t, err)
	// A worker that dies holding its first attempt: the lease expires, which counts.
	got := claim(t, pool, "ghost", 1, "10 milliseconds")
	require.Len(t, got, 1)
	require.Equal(t, expired.TaskID, got[0].TaskID)
	waitLeaseExpired(t, pool, expired.TaskID)
	capped, err := c.Enqueue(ctx, raw("capped", `{}`), nil) // 25 attempts of its own
	require.NoError(t, err)
	above, err := c.Enqueue(ctx, raw("capped_above", `{}`), &taskorch.EnqueueOpts{MaxAttempts: 2})
	require.NoError(t, err)

	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})

	waitStatus(t, pool, capped.TaskID, taskorch.StatusDead)
	require.Equal(t, int32(2), runs.Load())
	require.Equal(t, []string{"claimed:running", "retry_scheduled:pending", "claimed:running", "dead:dead"}, eventsOf(t, c, capped.TaskID))
	task, err := c.Get(ctx, capped.TaskID)
	require.NoError(t, err)
	require.Equal(t, 25, task.MaxAttempts, "the task's own max attempts are unchanged")
	require.Equal(t, "run 2 failed", *task.LastError)
	h, err := c.History(ctx, capped.TaskID)
	require.NoError(t, err)
	require.Len(t, h.Errors, 2)
	require.EqualValues(t, 2, h.Errors[1].Context["handler_max_attempts"])
	require.Equal(t, "dead", h.Errors[1].Context["outcome"])

	// The task's own max attempts below the cap still end it.
	waitStatus(t, pool, above.TaskID, taskorch.StatusDead)
	require.Equal(t, int64(2), scalar[int64](t, pool, `select count(*) from queues.task_lease where task_id = $1`, above.TaskID))

	waitStatus(t, pool, expired.TaskID, taskorch.StatusDead)
	require.Zero(t, expiredRuns.Load(), "claimed past the cap: not run")
	require.Contains(t, lastError(t, pool, expired.TaskID), "attempt 2 is past the handler's MaxAttempts of 1")
}

// RetryDelay replaces the database's backoff for its type's retriable failures; it is not asked
// when no attempt remains, and if it panics the database's backoff applies.
func TestHandlerOptsRetryDelay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)

	type call struct {
		attempt int
		err     string
	}
	var mu sync.Mutex
	var calls []call
	var flakyRuns atomic.Int32
	hs := taskorch.NewHandlers()
	hs.HandleFunc("flaky", func(context.Context, *taskorch.Task) error {
		if n := flakyRuns.Add(1); n < 3 {
			return fmt.Errorf("fail %d", n)
		}
		return nil
	}, &taskorch.HandlerOpts{RetryDelay: func(attempt int, err error) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, call{attempt, err.Error()})
		return -time.Second // negative: at once
	}})
	hs.HandleFunc("later", func(context.Context, *taskorch.Task) error { return errors.New("not yet") },
		&taskorch.HandlerOpts{RetryDelay: func(int, error) time.Duration { return time.Hour }})
	var lastCalls atomic.Int32
	hs.HandleFunc("last", func(context.Context, *taskorch.Task) error { return errors.New("no") },
		&taskorch.HandlerOpts{MaxAttempts: 1, RetryDelay: func(int, error) time.Duration { lastCalls.Add(1); return 0 }})
	hs.HandleFunc("panicky", func(context.Context, *taskorch.Task) error { return errors.New("no") },
		&taskorch.HandlerOpts{RetryDelay: func(int, error) time.Duration { panic("bad policy") }})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})

	flaky, err := c.Enqueue(ctx, raw("flaky", `{}`), nil)
	require.NoError(t, err)
	later, err := c.Enqueue(ctx, raw("later", `{}`), nil)
	require.NoError(t, err)
	last, err := c.Enqueue(ctx, raw("last", `{}`), nil)
	require.NoError(t, err)
	panicky, err := c.Enqueue(ctx, raw("panicky", `{}`), nil)
	require.NoError(t, err)

	waitStatus(t, pool, flaky.TaskID, taskorch.StatusCompleted)
	mu.Lock()
	require.Equal(t, []call{{1, "fail 1"}, {2, "fail 2"}}, calls)
	mu.Unlock()
	h, err := c.History(ctx, flaky.TaskID)
	require.NoError(t, err)
	require.Equal(t, "00:00:00", h.Errors[0].Context["retry_delay"])

	require.Eventually(t, func() bool {
		return scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, later.TaskID) == "pending" &&
			scalar[int](t, pool, `select attempt from queues.task where task_id = $1`, later.TaskID) == 1
	}, 20*time.Second, 5*time.Millisecond)
	require.True(t, scalar[bool](t, pool, `select run_at between now() + interval '59 minutes' and now() + interval '61 minutes'
		from queues.task where task_id = $1`, later.TaskID), "retried in an hour, as RetryDelay said")
	require.Equal(t, "01:00:00", scalar[string](t, pool, `select context->>'retry_delay' from queues.error where task_id = $1`, later.TaskID))

	waitStatus(t, pool, last.TaskID, taskorch.StatusDead)
	require.Zero(t, lastCalls.Load(), "no attempt remained: not asked")

	require.Eventually(t, func() bool {
		return scalar[int64](t, pool, `select count(*) from queues.error where task_id = $1`, panicky.TaskID) > 0
	}, 20*time.Second, 5*time.Millisecond)
	require.False(t, scalar[bool](t, pool, `select context ? 'retry_delay' from queues.error where task_id = $1 order by error_id limit 1`, panicky.TaskID),
		"the database's backoff applied")
	require.Equal(t, "retry_scheduled", scalar[string](t, pool,
		`select event from queues.task_event where task_id = $1 and event <> 'claimed' order by task_event_id limit 1`, panicky.TaskID))
}

// queues.fail_task_with_policy is fenced by the lease like fail_task, checks its input, and is
// the worker role's; enqueue_many_with_result is granted like enqueue_many (to nobody but the
// owner until an operator grants it).
func TestFailTaskWithPolicySQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	res, err := c.Enqueue(ctx, raw("sql_policy", `{}`), &taskorch.EnqueueOpts{MaxAttempts: 5})
	require.NoError(t, err)
	got := claim(t, pool, "w", 1, "5 minutes")
	require.Len(t, got, 1)
	lease := got[0].LeaseID

	_, err = pool.Exec(ctx, `select queues.fail_task_with_policy($1, 'x', $2, interval '-1 second')`, res.TaskID, lease)
	require.ErrorIs(t, taskorch.MapPgError(err), taskorch.ErrInvalidInput)
	_, err = pool.Exec(ctx, `select queues.fail_task_with_policy($1, 'x', $2, null, 0)`, res.TaskID, lease)
	require.ErrorIs(t, taskorch.MapPgError(err), taskorch.ErrInvalidInput)
	_, err = pool.Exec(ctx, `select queues.fail_task_with_policy(987654, 'x', 1)`)
	require.ErrorIs(t, taskorch.MapPgError(err), taskorch.ErrNotFound)

	// A stale lease is refused and recorded.
	var status *string
	require.NoError(t, pool.QueryRow(ctx, `select queues.fail_task_with_policy($1, 'late', $2)::text`, res.TaskID, lease+1000).Scan(&status))
	require.Nil(t, status)
	require.Contains(t, lastError(t, pool, res.TaskID), "failure refused: lease")

	// Under the lease: pending after the given delay; a repeat changes nothing.
	require.Equal(t, "pending", scalar[string](t, pool,
		`select queues.fail_task_with_policy($1, 'boom', $2, interval '10 minutes', 3)::text`, res.TaskID, lease))
	require.Equal(t, "pending", scalar[string](t, pool,
		`select queues.fail_task_with_policy($1, 'boom', $2, interval '10 minutes', 3)::text`, res.TaskID, lease))
	require.True(t, scalar[bool](t, pool, `select run_at > now() + interval '9 minutes' from queues.task where task_id = $1`, res.TaskID))
	require.Equal(t, []string{"claimed:running", "retry_scheduled:pending"}, eventsOf(t, c, res.TaskID))

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	mustExec(t, tx, `set local role worker_service_user`)
	require.True(t, scalar[bool](t, tx, // the worker role may call it (here refused: the task is not running)
		`select queues.fail_task_with_policy($1, 'x', $2) is null`, res.TaskID, lease+1))
	mustExec(t, tx, `savepoint s`)
	_, err = tx.Exec(ctx, `select queues.enqueue_many_with_result(array['x'], array['{}'::jsonb])`)
	require.ErrorContains(t, err, "permission denied")
	mustExec(t, tx, `rollback to savepoint s`)
	require.False(t, scalar[bool](t, pool, `select has_function_privilege('public',
		'queues.fail_task_with_policy(bigint, text, bigint, interval, integer, jsonb)', 'execute')`))
	require.False(t, scalar[bool](t, pool, `select has_function_privilege('public',
		'queues.enqueue_many_with_result(text[], jsonb[], timestamptz[], integer[], text[], integer[], bigint[], text)', 'execute')`))
}
