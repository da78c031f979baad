package taskorch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

func eventsOf(t *testing.T, c *taskorch.Client, id int64) []string {
	t.Helper()
	h, err := c.History(context.Background(), id)
	require.NoError(t, err)
	var out []string
	for _, e := range h.Events {
		out = append(out, e.Event+":"+string(*e.ToStatus))
	}
	return out
}

// A retriable failure goes back to pending after a backoff while attempts remain, then dead;
// every transition leaves an event, every claim a lease, every failure an error row.
func TestRetryWithBackoffThenDead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	res, err := c.Enqueue(ctx, raw("flaky", `{}`), &taskorch.EnqueueOpts{MaxAttempts: 3})
	require.NoError(t, err)

	// Attempt 1 fails: a retry is scheduled with the real backoff, in [now, now + 2s).
	got := claim(t, pool, "w", 1, "5 minutes")
	require.Len(t, got, 1)
	before := time.Now()
	require.Equal(t, "pending", scalar[string](t, pool, `select queues.fail_task($1, 'boom 1', $2)::text`, res.TaskID, got[0].LeaseID))
	task, err := c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusPending, task.Status)
	require.Equal(t, "boom 1", *task.LastError)
	require.WithinRange(t, task.RunAt, before.Add(-time.Second), before.Add(3*time.Second))

	// Let the backoff pass (on the task's clock), and from here on make retries due at once,
	// so the test need not wait.
	mustExec(t, pool, `update queues.task set run_at = now() where task_id = $1`, res.TaskID)
	noRetryDelay(t, pool)
	got = claim(t, pool, "w", 1, "5 minutes")
	require.Len(t, got, 1)
	require.Equal(t, 2, got[0].Attempt)
	require.Equal(t, "pending", scalar[string](t, pool, `select queues.fail_task($1, 'boom 2', $2)::text`, res.TaskID, got[0].LeaseID))
	got = claim(t, pool, "w", 1, "5 minutes")
	require.Len(t, got, 1)
	require.Equal(t, 3, got[0].Attempt)
	require.Equal(t, "dead", scalar[string](t, pool, `select queues.fail_task($1, 'boom 3', $2)::text`, res.TaskID, got[0].LeaseID))
	require.Equal(t, "dead", scalar[string](t, pool, `select queues.fail_task($1, 'boom 3', $2)::text`, res.TaskID, got[0].LeaseID),
		"a repeated failure under the same lease changes nothing")
	require.Empty(t, claim(t, pool, "w", 1, "5 minutes"), "a dead task is not claimed")

	task, err = c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusDead, task.Status)
	require.NotNil(t, task.DeadAt)
	require.Equal(t, 3, task.Attempt)
	require.Equal(t, []string{
		"claimed:running", "retry_scheduled:pending",
		"claimed:running", "retry_scheduled:pending",
		"claimed:running", "dead:dead",
	}, eventsOf(t, c, res.TaskID))
	h, err := c.History(ctx, res.TaskID)
	require.NoError(t, err)
	require.Len(t, h.Leases, 3)
	require.Len(t, h.Errors, 3)
	require.Equal(t, "boom 3", h.Errors[2].Message)
	require.Equal(t, "dead", h.Errors[2].Context["outcome"])

	// Retried by hand: pending, due now, attempts reset, history kept.
	task, err = c.Retry(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusPending, task.Status)
	require.Equal(t, 0, task.Attempt)
	got = claim(t, pool, "w", 1, "5 minutes")
	require.Len(t, got, 1)
	require.True(t, scalar[bool](t, pool, `select queues.complete_task($1, $2)`, res.TaskID, got[0].LeaseID))
	events := eventsOf(t, c, res.TaskID)
	require.Equal(t, []string{"retried:pending", "claimed:running", "completed:completed"}, events[len(events)-3:])
}

// The backoff is exponential with full jitter: uniform in [0, min(1h, 2^attempt s)).
func TestRetryDelayPolicy(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	for _, tc := range []struct {
		attempt int
		ceiling float64
	}{{1, 2}, {3, 8}, {10, 1024}, {12, 3600}, {40, 3600}} {
		var lo, hi, avg float64
		require.NoError(t, pool.QueryRow(context.Background(),
			`select min(s), max(s), avg(s) from (select extract(epoch from queues.retry_delay($1))::float8 s from generate_series(1, 2000)) x`,
			tc.attempt).Scan(&lo, &hi, &avg))
		require.GreaterOrEqual(t, lo, 0.0, "attempt %d", tc.attempt)
		require.Less(t, hi, tc.ceiling, "attempt %d", tc.attempt)
		require.InDelta(t, tc.ceiling/2, avg, tc.ceiling*0.1, "full jitter averages half the ceiling (attempt %d)", tc.attempt)
	}
}

// A non-retriable failure is terminal at once.
func TestNonRetriableFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	res, err := c.Enqueue(ctx, raw("strict", `{}`), nil)
	require.NoError(t, err)
	got := claim(t, pool, "w", 1, "5 minutes")
	require.Equal(t, "failed", scalar[string](t, pool,
		`select queues.fail_task($1, 'unknown task type strict', $2, false, '{"reason":"unknown_type"}')::text`, res.TaskID, got[0].LeaseID))
	task, err := c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusFailed, task.Status)
	require.NotNil(t, task.FailedAt)
	h, err := c.History(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, "unknown_type", h.Errors[0].Context["reason"])
	require.Empty(t, claim(t, pool, "w", 1, "5 minutes"))
}

// Cancel works on pending and running tasks (the running worker's completion is then refused),
// is idempotent, and refuses completed tasks. Retry refuses running and completed tasks.
func TestCancelAndRetryRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	ids, err := c.EnqueueMany(ctx, []taskorch.EnqueueParams{
		{Args: raw("c", `{"n":1}`), Opts: &taskorch.EnqueueOpts{Priority: new(3)}},
		{Args: raw("c", `{"n":2}`), Opts: &taskorch.EnqueueOpts{Priority: new(2)}},
		{Args: raw("c", `{"n":3}`), Opts: &taskorch.EnqueueOpts{Priority: new(1), ScheduledAt: time.Now().Add(time.Hour)}},
	})
	require.NoError(t, err)
	running, done, pending := ids[0].TaskID, ids[1].TaskID, ids[2].TaskID
	got := claim(t, pool, "w", 2, "5 minutes")
	require.Len(t, got, 2)
	require.True(t, scalar[bool](t, pool, `select queues.complete_task($1, $2)`, done, got[1].LeaseID))

	task, err := c.Cancel(ctx, pending)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusCancelled, task.Status)
	require.NotNil(t, task.CancelledAt)
	task, err = c.Cancel(ctx, pending)
	require.NoError(t, err, "cancelling twice is harmless")
	require.Equal(t, taskorch.StatusCancelled, task.Status)

	_, err = c.Retry(ctx, running)
	require.ErrorIs(t, err, taskorch.ErrWrongState)
	require.ErrorContains(t, err, "is running")

	task, err = c.Cancel(ctx, running)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusCancelled, task.Status)
	require.False(t, scalar[bool](t, pool, `select queues.complete_task($1, $2)`, running, got[0].LeaseID),
		"the worker of a cancelled task cannot complete it")
	task, err = c.Get(ctx, running)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusCancelled, task.Status)

	_, err = c.Cancel(ctx, done)
	require.ErrorIs(t, err, taskorch.ErrWrongState)
	_, err = c.Retry(ctx, done)
	require.ErrorIs(t, err, taskorch.ErrWrongState)

	task, err = c.Retry(ctx, pending)
	require.NoError(t, err, "a cancelled task can be retried")
	require.Equal(t, taskorch.StatusPending, task.Status)
	require.Equal(t, []string{"cancelled:cancelled", "retried:pending"}, eventsOf(t, c, pending))

	for _, fn := range []func(context.Context, int64) (*taskorch.Task, error){c.Cancel, c.Retry, c.Get} {
		_, err = fn(ctx, 987654)
		require.ErrorIs(t, err, taskorch.ErrNotFound)
	}
}

// Snoozing puts a running task back to pending until a time without spending an attempt.
func TestSnooze(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	res, err := c.Enqueue(ctx, raw("sleepy", `{}`), &taskorch.EnqueueOpts{MaxAttempts: 1})
	require.NoError(t, err)
	got := claim(t, pool, "w", 1, "5 minutes")
	require.True(t, scalar[bool](t, pool, `select queues.snooze_task($1, $2, now() + interval '1 hour')`, res.TaskID, got[0].LeaseID))
	require.False(t, scalar[bool](t, pool, `select queues.snooze_task($1, $2, now())`, res.TaskID, got[0].LeaseID), "the lease is gone")
	task, err := c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusPending, task.Status)
	require.Equal(t, 0, task.Attempt, "a snooze does not spend an attempt")
	require.WithinDuration(t, time.Now().Add(time.Hour), task.RunAt, time.Minute)
	require.Empty(t, claim(t, pool, "w", 1, "5 minutes"))
}

// History tables are append-only.
func TestHistoryIsAppendOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	_, err := c.Enqueue(ctx, raw("h", `{}`), nil)
	require.NoError(t, err)
	require.NotEmpty(t, claim(t, pool, "w", 1, "5 minutes"))
	for _, table := range []string{"queues.task_lease", "queues.task_event", "queues.error"} {
		_, err := pool.Exec(ctx, `update `+table+` set task_id = task_id`)
		require.ErrorContains(t, err, "append-only", table)
	}
}
