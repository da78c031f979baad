package taskorch_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// A worker claims only the types it can run: db_function, its Go handlers' types and the
// channels it has a provider for (a nil provider is none). The others stay pending, no attempt
// spent, while it works past them; it records its types in queues.worker. A worker with
// ClaimUnknownTypes claims them and fails them, saying why, and is recorded as claiming every
// type.
func TestWorkerClaimsOnlyTheTypesItRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("known", func(context.Context, *taskorch.Task) error { return nil })
	sent := taskorch.ChannelProviderFunc(func(context.Context, taskorch.ChannelCall) (json.RawMessage, error) {
		return json.RawMessage(`{"id": "sent"}`), nil
	})
	channels := map[string]taskorch.ChannelProvider{taskorch.TypeEmail: sent, taskorch.TypeSMS: nil}

	// The types it cannot run first in claim order (higher priority, enqueued first): a claim
	// that returns the others would have returned these first, had they been claimable.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	var skipped []int64
	for _, typ := range []string{"unknown_type", taskorch.TypeSMS, taskorch.TypeFileDelete} {
		res, err := c.EnqueueTx(ctx, tx, raw(typ, `{"to": "+15550100", "bucket": "b", "object_key": "k"}`),
			&taskorch.EnqueueOpts{Priority: new(10), MaxAttempts: 1})
		require.NoError(t, err)
		skipped = append(skipped, res.TaskID)
	}
	var ran []int64
	for _, typ := range []string{"known", taskorch.TypeEmail, "known"} {
		res, err := c.EnqueueTx(ctx, tx, raw(typ, `{"to": "ada@example.com", "subject": "Hi", "text": "Hello"}`), nil)
		require.NoError(t, err)
		ran = append(ran, res.TaskID)
	}
	require.NoError(t, tx.Commit(ctx))

	startWorker(t, pool, &taskorch.WorkerConfig{ID: "only-known", Handlers: hs, Channels: channels})
	for _, id := range ran {
		waitStatus(t, pool, id, taskorch.StatusCompleted)
	}
	require.Equal(t, []string{"db_function", "email", "known"},
		scalar[[]string](t, pool, `select task_types from queues.worker where worker_id = 'only-known'`))
	for _, id := range skipped {
		require.Equal(t, "pending 0 0", scalar[string](t, pool, `select format('%s %s %s', t.status, t.attempt,
			(select count(*) from queues.task_lease l where l.task_id = t.task_id)) from queues.task t where t.task_id = $1`, id),
			"task %d: never claimed", id)
	}

	// The opt-out claims everything and fails what it cannot run, as before.
	startWorker(t, pool, &taskorch.WorkerConfig{ID: "claims-all", Handlers: hs, Channels: channels, ClaimUnknownTypes: true})
	for _, id := range skipped {
		waitStatus(t, pool, id, taskorch.StatusFailed)
	}
	require.Contains(t, lastError(t, pool, skipped[0]), `unknown task type "unknown_type"`)
	require.Contains(t, lastError(t, pool, skipped[1]), "no provider is configured for the sms channel")
	require.Contains(t, lastError(t, pool, skipped[2]), "no provider is configured for the file_delete channel")
	require.True(t, scalar[bool](t, pool, `select task_types is null from queues.worker where worker_id = 'claims-all'`),
		"recorded as claiming every type")
}
