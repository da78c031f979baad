package taskorch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// batchItem is the args of the batch handler tests' tasks.
type batchItem struct {
	N    int  `json:"n"`
	Fail bool `json:"fail,omitempty"` // the handler fails its first attempt
}

func (batchItem) TaskType() string { return "batch.item" }

// enqueueItems enqueues n items (Fail for those fail says) and returns their ids, in order.
func enqueueItems(t *testing.T, c *taskorch.Client, n int, fail func(i int) bool, opts *taskorch.EnqueueOpts) []int64 {
	t.Helper()
	params := make([]taskorch.EnqueueParams, n)
	for i := range params {
		params[i] = taskorch.EnqueueParams{Args: batchItem{N: i, Fail: fail != nil && fail(i)}, Opts: opts}
	}
	res, err := c.EnqueueMany(context.Background(), params)
	require.NoError(t, err)
	ids := make([]int64, n)
	for i, r := range res {
		ids[i] = r.TaskID
	}
	return ids
}

// batchCalls records a batch handler's calls: the task ids of each.
type batchCalls struct {
	mu    sync.Mutex
	calls [][]int64
}

func (b *batchCalls) add(tasks []*taskorch.TaskFor[batchItem]) {
	ids := make([]int64, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, ids)
}

func (b *batchCalls) get() [][]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][]int64(nil), b.calls...)
}

// runsOf counts the calls that held each task.
func (b *batchCalls) runsOf() map[int64]int {
	out := map[int64]int{}
	for _, c := range b.get() {
		for _, id := range c {
			out[id]++
		}
	}
	return out
}

// startBatchWorker registers fn as the batch handler of batchItem and starts a worker with it.
func startBatchWorker(t *testing.T, pool *pgxpool.Pool, fn func(ctx context.Context, tasks []*taskorch.TaskFor[batchItem]) []error,
	opts *taskorch.BatchOpts, cfg *taskorch.WorkerConfig) {
	t.Helper()
	hs := taskorch.NewHandlers()
	taskorch.AddBatchHandler(hs, fn, opts)
	if cfg == nil {
		cfg = &taskorch.WorkerConfig{}
	}
	cfg.Handlers = hs
	startWorker(t, pool, cfg)
}

// Each task of a batch keeps its own outcome: those the handler fails are retried, the others
// complete once, and each completion carries the result the handler set for that task
// (TaskFor.SetResult; SetResult on the batch's context, which is no single task's, is refused).
func TestBatchHandlerPartialFailure(t *testing.T) {
	t.Parallel()
	c, pool := newClient(t)
	noRetryDelay(t, pool)
	ids := enqueueItems(t, c, 8, func(i int) bool { return i%3 == 0 }, &taskorch.EnqueueOpts{MaxAttempts: 3})
	var calls batchCalls
	ctxResult := make(chan error, 1)
	startBatchWorker(t, pool, func(ctx context.Context, tasks []*taskorch.TaskFor[batchItem]) []error {
		calls.add(tasks)
		select {
		case ctxResult <- taskorch.SetResult(ctx, "whose?"):
		default:
		}
		errs := make([]error, len(tasks))
		for i, task := range tasks {
			if task.Args.Fail && task.Attempt == 1 {
				errs[i] = errors.New("item refused")
				continue
			}
			require.NoError(t, task.SetResult(map[string]int{"n": task.Args.N}))
		}
		return errs
	}, nil, nil)

	for i, id := range ids {
		waitStatus(t, pool, id, taskorch.StatusCompleted)
		task, err := c.Get(context.Background(), id)
		require.NoError(t, err)
		require.JSONEq(t, fmt.Sprintf(`{"n": %d}`, i), string(task.Result))
		if i%3 == 0 {
			require.Equal(t, 2, task.Attempt, "task %d failed once, then completed", id)
			require.Equal(t, "item refused", lastError(t, pool, id))
		} else {
			require.Equal(t, 1, task.Attempt, "task %d completed at once", id)
			require.Zero(t, scalar[int](t, pool, `select count(*) from queues.error where task_id = $1`, id))
		}
	}
	runs := calls.runsOf()
	for i, id := range ids {
		want := 1
		if i%3 == 0 {
			want = 2
		}
		require.Equal(t, want, runs[id], "calls holding task %d", id)
	}
	require.ErrorIs(t, <-ctxResult, taskorch.ErrInvalidInput, "the batch's context is no single task's: TaskFor.SetResult sets a result")
	// Enqueued before the worker started, the tasks came in one claim: the first call held them all.
	require.Len(t, calls.get()[0], len(ids))
}

// A task of a batch that the handler snoozes runs again later without spending an attempt; the
// others of its batch complete.
func TestBatchHandlerSnoozeOneTask(t *testing.T) {
	t.Parallel()
	c, pool := newClient(t)
	ids := enqueueItems(t, c, 4, nil, &taskorch.EnqueueOpts{MaxAttempts: 1})
	snoozed := ids[1]
	var snoozes atomic.Int32
	startBatchWorker(t, pool, func(_ context.Context, tasks []*taskorch.TaskFor[batchItem]) []error {
		errs := make([]error, len(tasks))
		for i, task := range tasks {
			if task.ID == snoozed && snoozes.Add(1) == 1 {
				errs[i] = taskorch.Snooze(10 * time.Millisecond)
			}
		}
		return errs
	}, nil, nil)

	for _, id := range ids {
		waitStatus(t, pool, id, taskorch.StatusCompleted)
		require.Equal(t, 1, scalar[int](t, pool, `select attempt from queues.task where task_id = $1`, id))
		if id == snoozed {
			require.Equal(t, []string{"claimed:running", "snoozed:pending", "claimed:running", "completed:completed"}, eventsOf(t, c, id))
		} else {
			require.Equal(t, []string{"claimed:running", "completed:completed"}, eventsOf(t, c, id))
		}
	}
}

// No call holds more than MaxSize tasks, and every task runs once. The tasks were enqueued
// before the worker started (one claim brought them all), so the first batch formed is a full
// one: the first three tasks in claim order (calls run concurrently, in any order).
func TestBatchHandlerMaxSize(t *testing.T) {
	t.Parallel()
	c, pool := newClient(t)
	ids := enqueueItems(t, c, 7, nil, nil)
	var calls batchCalls
	startBatchWorker(t, pool, func(_ context.Context, tasks []*taskorch.TaskFor[batchItem]) []error {
		calls.add(tasks)
		return make([]error, len(tasks))
	}, &taskorch.BatchOpts{MaxSize: 3}, nil)

	for _, id := range ids {
		waitStatus(t, pool, id, taskorch.StatusCompleted)
	}
	for _, call := range calls.get() {
		require.LessOrEqual(t, len(call), 3)
	}
	var first []int64
	for _, call := range calls.get() {
		if slices.Contains(call, ids[0]) {
			first = call
		}
	}
	require.Equal(t, ids[:3], first, "the first batch: the first three tasks, in claim order")
	runs := calls.runsOf()
	require.Len(t, runs, len(ids))
	for _, id := range ids {
		require.Equal(t, 1, runs[id])
	}
}

// A handler that returns as many errors as tasks, or panics, fails the attempt of every task of
// the call with an error that says so; nothing is lost: each task is retried and completes.
func TestBatchHandlerBadReturns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		bad  func(n int) []error
		msg  string
	}{
		{"too few errors", func(int) []error { return nil }, `the batch handler of "batch.item" returned 0 errors for a batch of`},
		{"too many errors", func(n int) []error { return make([]error, n+1) }, "errors for a batch of"},
		{"panic", func(int) []error { panic("batch exploded") }, "handler panicked: batch exploded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, pool := newClient(t)
			noRetryDelay(t, pool)
			ids := enqueueItems(t, c, 5, nil, &taskorch.EnqueueOpts{MaxAttempts: 2})
			startBatchWorker(t, pool, func(_ context.Context, tasks []*taskorch.TaskFor[batchItem]) []error {
				for _, task := range tasks {
					if task.Attempt == 1 {
						return tc.bad(len(tasks))
					}
				}
				return make([]error, len(tasks))
			}, nil, nil)
			for _, id := range ids {
				waitStatus(t, pool, id, taskorch.StatusCompleted)
				require.Equal(t, 2, scalar[int](t, pool, `select attempt from queues.task where task_id = $1`, id))
				require.Contains(t, lastError(t, pool, id), tc.msg)
			}
		})
	}
}

// Options that are programming errors panic at registration, naming the type.
func TestAddBatchHandlerBadOptions(t *testing.T) {
	t.Parallel()
	fn := func(context.Context, []*taskorch.TaskFor[batchItem]) []error { return nil }
	require.PanicsWithValue(t, `taskorch: batch handler options of "batch.item": MaxSize must not be negative, got -1`, func() {
		taskorch.AddBatchHandler(taskorch.NewHandlers(), fn, &taskorch.BatchOpts{MaxSize: -1})
	})
	require.PanicsWithValue(t, `taskorch: batch handler options of "batch.item": MaxWait must not be negative, got -1s`, func() {
		taskorch.AddBatchHandler(taskorch.NewHandlers(), fn, &taskorch.BatchOpts{MaxWait: -time.Second})
	})
	require.Panics(t, func() {
		taskorch.AddBatchHandler(taskorch.NewHandlers(), fn, &taskorch.BatchOpts{HandlerOpts: taskorch.HandlerOpts{MaxAttempts: -1}})
	})
	require.PanicsWithValue(t, "taskorch: nil batch handler for batch.item", func() {
		taskorch.AddBatchHandler[batchItem](taskorch.NewHandlers(), nil, nil)
	})
	hs := taskorch.NewHandlers()
	taskorch.AddBatchHandler(hs, fn, nil)
	require.Panics(t, func() { taskorch.AddBatchHandler(hs, fn, nil) }, "a second handler of the type")
}
