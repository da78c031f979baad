package taskorchtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/taskorchtest"
)

// charge is a task whose handler does what its args say: complete with a result, snooze,
// discard, fail, panic, or outlast its timeout.
type charge struct {
	OrderID int64  `json:"order_id"`
	Do      string `json:"do"`
}

func (charge) TaskType() string { return "charge" }

type receipt struct {
	Receipt string `json:"receipt"`
	Attempt int    `json:"attempt"`
}

var errDeclined = errors.New("card declined")

func chargeHandlers() *taskorch.Handlers {
	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(ctx context.Context, t *taskorch.TaskFor[charge]) error {
		switch t.Args.Do {
		case "snooze":
			return taskorch.Snooze(time.Minute)
		case "discard":
			return taskorch.Discard(errDeclined)
		case "fail":
			return errDeclined
		case "panic":
			panic("boom")
		case "hang":
			<-ctx.Done()
			return ctx.Err()
		}
		return taskorch.SetResult(ctx, receipt{Receipt: "r-" + string(rune('0'+t.Args.OrderID)), Attempt: t.Attempt})
	}, &taskorch.HandlerOpts{Timeout: 2 * time.Second})
	taskorch.AddHandlerWithResult(hs, func(_ context.Context, t *taskorch.TaskFor[greet]) (string, error) {
		return "hello " + t.Args.Name, nil
	})
	return hs
}

// Work runs one task through its handler, without a worker or a database, and reports what came
// of it as a worker would record it.
func TestWork(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg := &taskorch.WorkerConfig{Handlers: chargeHandlers()}

	res := taskorchtest.Work(ctx, t, cfg, charge{OrderID: 7}, nil)
	require.Equal(t, taskorchtest.OutcomeCompleted, res.Outcome)
	require.NoError(t, res.Err)
	require.JSONEq(t, `{"receipt": "r-7", "attempt": 1}`, string(res.Result))
	require.Equal(t, "charge", res.Task.Type)
	require.JSONEq(t, `{"order_id": 7, "do": ""}`, string(res.Task.Payload))

	res = taskorchtest.Work(ctx, t, cfg, charge{OrderID: 3}, &taskorchtest.WorkOpts{ID: 42, Attempt: 4, MaxAttempts: 5})
	require.JSONEq(t, `{"receipt": "r-3", "attempt": 4}`, string(res.Result))
	require.Equal(t, int64(42), res.Task.ID)
	require.Equal(t, 5, res.Task.MaxAttempts)

	res = taskorchtest.Work(ctx, t, cfg, charge{Do: "snooze"}, nil)
	require.Equal(t, taskorchtest.OutcomeSnoozed, res.Outcome)
	require.Equal(t, time.Minute, res.Snooze)
	var snooze *taskorch.SnoozeError
	require.ErrorAs(t, res.Err, &snooze)
	require.Nil(t, res.Result)

	res = taskorchtest.Work(ctx, t, cfg, charge{Do: "discard"}, nil)
	require.Equal(t, taskorchtest.OutcomeFailed, res.Outcome)
	require.False(t, res.Retriable)
	require.ErrorIs(t, res.Err, errDeclined)
	require.Equal(t, "card declined", res.Message)

	res = taskorchtest.Work(ctx, t, cfg, charge{Do: "fail"}, nil)
	require.Equal(t, taskorchtest.OutcomeFailed, res.Outcome)
	require.True(t, res.Retriable)
	require.ErrorIs(t, res.Err, errDeclined)

	res = taskorchtest.Work(ctx, t, cfg, charge{Do: "panic"}, nil)
	require.Equal(t, taskorchtest.OutcomeFailed, res.Outcome)
	require.True(t, res.Retriable)
	require.Contains(t, res.Message, "handler panicked: boom")
	require.ErrorContains(t, res.Err, "handler panicked: boom")

	// The handler's options apply: its timeout, as the worker words it.
	res = taskorchtest.Work(ctx, t, cfg, charge{Do: "hang"}, nil)
	require.Equal(t, taskorchtest.OutcomeFailed, res.Outcome)
	require.Contains(t, res.Message, "timed out after 2s")

	// A context that ends first: a worker writes nothing.
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	res = taskorchtest.Work(stopped, t, cfg, charge{Do: "hang"}, nil)
	require.Equal(t, taskorchtest.OutcomeStopped, res.Outcome)

	res = taskorchtest.Work(ctx, t, cfg, greet{Name: "Ada"}, nil)
	require.Equal(t, taskorchtest.OutcomeCompleted, res.Outcome)
	require.JSONEq(t, `"hello Ada"`, string(res.Result))

	// The worker's result bound applies.
	res = taskorchtest.Work(ctx, t, &taskorch.WorkerConfig{Handlers: chargeHandlers(), MaxResultBytes: 8}, greet{Name: "Ada"}, nil)
	require.Equal(t, taskorchtest.OutcomeFailed, res.Outcome)
	require.False(t, res.Retriable)
	require.Contains(t, res.Message, "over the worker's limit of 8 bytes")

	// The handler's attempt cap and retry delay apply, as the worker applies them.
	capped := taskorch.NewHandlers()
	taskorch.AddHandler(capped, func(context.Context, *taskorch.TaskFor[charge]) error { return errDeclined },
		&taskorch.HandlerOpts{MaxAttempts: 3, RetryDelay: func(attempt int, _ error) time.Duration { return time.Duration(attempt) * time.Second }})
	res = taskorchtest.Work(ctx, t, &taskorch.WorkerConfig{Handlers: capped}, charge{}, &taskorchtest.WorkOpts{Attempt: 2})
	require.Equal(t, taskorchtest.OutcomeFailed, res.Outcome)
	require.NotNil(t, res.RetryDelay)
	require.Equal(t, 2*time.Second, *res.RetryDelay)
	res = taskorchtest.Work(ctx, t, &taskorch.WorkerConfig{Handlers: capped}, charge{}, &taskorchtest.WorkOpts{Attempt: 3})
	require.Nil(t, res.RetryDelay, "no retry follows the last attempt")
	res = taskorchtest.Work(ctx, t, &taskorch.WorkerConfig{Handlers: capped}, charge{}, &taskorchtest.WorkOpts{Attempt: 4})
	require.Equal(t, taskorchtest.OutcomeFailed, res.Outcome)
	require.Contains(t, res.Message, "attempt 4 is past the handler's MaxAttempts of 3")

	msg := fails(t, func(tb testing.TB) { taskorchtest.Work(ctx, tb, cfg, refuse{}, nil) })
	require.Contains(t, msg, `taskorchtest: the WorkerConfig has no handler for task type "refuse"`)
	msg = fails(t, func(tb testing.TB) { taskorchtest.Work(ctx, tb, nil, refuse{}, nil) })
	require.Contains(t, msg, `has no handler for task type "refuse"`)
	msg = fails(t, func(tb testing.TB) {
		taskorchtest.Work(ctx, tb, &taskorch.WorkerConfig{Handlers: cfg.Handlers, Concurrency: -1}, charge{}, nil)
	})
	require.Contains(t, msg, "taskorchtest: the worker's configuration: taskorch: worker concurrency must be between 1 and 10000")
}

// WorkTask claims a task of the database (here, one the test's transaction enqueued), runs it
// and writes its outcome with the worker's statements: the task's row says what came of it.
func TestWorkTask(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	client, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	cfg := &taskorch.WorkerConfig{Handlers: chargeHandlers()}
	tx := taskorchtest.Tx(t, pool)
	enqueue := func(args taskorch.TaskArgs, opts *taskorch.EnqueueOpts) int64 {
		res, err := client.EnqueueTx(ctx, tx, args, opts)
		require.NoError(t, err)
		return res.TaskID
	}

	id := enqueue(charge{OrderID: 7}, nil)
	res := taskorchtest.WorkTask(ctx, t, cfg, tx, id)
	require.Equal(t, taskorchtest.OutcomeCompleted, res.Outcome)
	require.Equal(t, taskorch.StatusCompleted, res.Task.Status)
	require.JSONEq(t, `{"receipt": "r-7", "attempt": 1}`, string(res.Task.Result))
	require.JSONEq(t, string(res.Result), string(res.Task.Result))
	got, err := client.GetTx(ctx, tx, id)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusCompleted, got.Status)

	id = enqueue(charge{Do: "fail"}, &taskorch.EnqueueOpts{MaxAttempts: 2})
	res = taskorchtest.WorkTask(ctx, t, cfg, tx, id)
	require.Equal(t, taskorchtest.OutcomeFailed, res.Outcome)
	require.Equal(t, taskorch.StatusPending, res.Task.Status, "retried")
	require.Equal(t, 1, res.Task.Attempt)
	require.Equal(t, "card declined", *res.Task.LastError)
	require.True(t, res.Task.RunAt.After(res.Task.EnqueuedAt), "after a backoff")

	id = enqueue(charge{Do: "discard"}, nil)
	res = taskorchtest.WorkTask(ctx, t, cfg, tx, id)
	require.Equal(t, taskorch.StatusFailed, res.Task.Status)
	require.Equal(t, "card declined", *res.Task.LastError)

	id = enqueue(charge{Do: "snooze"}, nil)
	res = taskorchtest.WorkTask(ctx, t, cfg, tx, id)
	require.Equal(t, taskorchtest.OutcomeSnoozed, res.Outcome)
	require.Equal(t, taskorch.StatusPending, res.Task.Status)
	require.Equal(t, 0, res.Task.Attempt, "a snooze spends no attempt")
	require.True(t, res.Task.RunAt.After(res.Task.EnqueuedAt.Add(50*time.Second)), "due in a minute: %s", res.Task.RunAt)

	// A task that is not pending and due cannot be claimed: the test fails, saying so.
	msg := fails(t, func(tb testing.TB) { taskorchtest.WorkTask(ctx, tb, cfg, tx, id) })
	require.Contains(t, msg, "taskorchtest: claim task")
	require.Contains(t, msg, "cannot be claimed")
	id = enqueue(refuse{}, nil)
	msg = fails(t, func(tb testing.TB) { taskorchtest.WorkTask(ctx, tb, cfg, tx, id) })
	require.Contains(t, msg, `has no handler for task type "refuse"`)
	require.NoError(t, tx.Rollback(ctx))

	// On the pool, committed.
	res2, err := client.Enqueue(ctx, greet{Name: "Bob"}, nil)
	require.NoError(t, err)
	res = taskorchtest.WorkTask(ctx, t, cfg, pool, res2.TaskID)
	require.Equal(t, taskorch.StatusCompleted, res.Task.Status)
	done, err := client.Wait(ctx, res2.TaskID)
	require.NoError(t, err)
	require.JSONEq(t, `"hello Bob"`, string(done.Result))
	require.NoError(t, client.Close())
}
