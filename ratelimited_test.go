package taskorch_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// A Go handler or a channel provider that returns RateLimited snoozes its task for the time
// given, without spending an attempt: a task with one attempt is rate limited twice and still
// completes.
func TestRateLimitedSnoozesWithoutSpendingAnAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	var goRuns, providerCalls atomic.Int32
	hs := taskorch.NewHandlers()
	hs.HandleFunc("rl.go", func(context.Context, *taskorch.Task) error {
		if goRuns.Add(1) <= 2 {
			return taskorch.RateLimited(errors.New("429 from the API"), 50*time.Millisecond)
		}
		return nil
	})
	provider := taskorch.ChannelProviderFunc(func(context.Context, taskorch.ChannelCall) (json.RawMessage, error) {
		if providerCalls.Add(1) <= 2 {
			return nil, taskorch.RateLimited(errors.New("slow down"), 0) // the default backoff
		}
		return json.RawMessage(`{"id": "sent"}`), nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs,
		Channels: map[string]taskorch.ChannelProvider{taskorch.TypeEmail: provider}})

	goTask, err := c.Enqueue(ctx, raw("rl.go", `{}`), &taskorch.EnqueueOpts{MaxAttempts: 1})
	require.NoError(t, err)
	email, err := c.Enqueue(ctx, raw(taskorch.TypeEmail, `{"to": "a@example.com", "subject": "s", "text": "t"}`),
		&taskorch.EnqueueOpts{MaxAttempts: 1})
	require.NoError(t, err)

	for _, id := range []int64{goTask.TaskID, email.TaskID} {
		waitStatus(t, pool, id, taskorch.StatusCompleted)
		require.Equal(t, []string{"claimed:running", "snoozed:pending", "claimed:running", "snoozed:pending",
			"claimed:running", "completed:completed"}, eventsOf(t, c, id))
		require.Equal(t, 1, scalar[int](t, pool, `select attempt from queues.task where task_id = $1`, id))
	}
	// The provider's two refusals were DefaultRateLimitBackoff apart.
	require.True(t, scalar[bool](t, pool, `select max(occurred_at) filter (where event = 'claimed')
		- min(occurred_at) filter (where event = 'claimed') >= 2 * $2::interval
		from queues.task_history where task_id = $1`, email.TaskID, taskorch.DefaultRateLimitBackoff))
}
