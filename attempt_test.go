package taskorch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// Task.Attempt counts the attempts spent, the running one included: a snooze, a rate-limited
// return and a give-back at shutdown do not spend one, a failure does.
func TestTaskAttemptCountsSpentAttempts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)

	var mu sync.Mutex
	var seen []int
	holding := make(chan struct{})
	hs := taskorch.NewHandlers()
	hs.HandleFunc("attempts", func(ctx context.Context, task *taskorch.Task) error {
		mu.Lock()
		seen = append(seen, task.Attempt)
		run := len(seen)
		mu.Unlock()
		switch run {
		case 1:
			return taskorch.Snooze(10 * time.Millisecond)
		case 2:
			return taskorch.RateLimited(errors.New("slow down"), 10*time.Millisecond)
		case 3:
			return errors.New("fails once")
		case 4:
			close(holding)
			<-ctx.Done() // until the worker stops: given back
			return context.Cause(ctx)
		default:
			return nil
		}
	}, &taskorch.HandlerOpts{RetryDelay: func(int, error) time.Duration { return 10 * time.Millisecond }})

	first, _ := startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, ShutdownGrace: time.Hour})
	res, err := c.Enqueue(ctx, raw("attempts", `{}`), nil)
	require.NoError(t, err)
	<-holding
	cut, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, first.Stop(cut), context.Canceled) // the grace cut short: given back
	<-first.Stopped()

	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})
	waitStatus(t, pool, res.TaskID, taskorch.StatusCompleted)
	mu.Lock()
	require.Equal(t, []int{1, 1, 1, 2, 2}, seen, "snooze, rate limit, failure, give-back, done")
	mu.Unlock()
	task, err := c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, 2, task.Attempt)
	require.Equal(t, 5, scalar[int](t, pool, `select count(*) from queues.task_lease where task_id = $1`, res.TaskID),
		"five claims")
}
