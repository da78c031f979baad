package taskorch_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// A handler error that quotes a connection string or a key=value secret is logged masked
// (internal/redact), while queues.error keeps the whole message for the operator who may read
// the table.
func TestWorkerLogMasksSecretsInHandlerErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	var buf lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	const msg = "connect postgres://u:hunter2pw@db/x: refused; retry with password=kv_LEAK1, X-Api-Key: hdr_LEAK2"
	hs := taskorch.NewHandlers()
	hs.HandleFunc("leaky", func(context.Context, *taskorch.Task) error { return errors.New(msg) })
	_, stop := startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Logger: logger})

	res, err := c.Enqueue(ctx, raw("leaky", `{}`), &taskorch.EnqueueOpts{MaxAttempts: 1})
	require.NoError(t, err)
	waitStatus(t, pool, res.TaskID, taskorch.StatusDead)
	stop()

	logs := string(buf.Bytes())
	require.Contains(t, logs, `"msg":"task failed"`)
	require.Contains(t, logs, "postgres://u:xxxxx@db/x: refused; retry with password=xxxxx, X-Api-Key: xxxxx")
	require.NotContains(t, logs, "hunter2pw")
	require.NotContains(t, logs, "LEAK")

	var stored string
	require.NoError(t, pool.QueryRow(ctx, `select error_message from queues.error where task_id = $1`, res.TaskID).Scan(&stored))
	require.Equal(t, msg, stored, "the database keeps the message as the handler wrote it")
}
