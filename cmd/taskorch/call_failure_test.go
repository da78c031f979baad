package main

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// A channel task completed although its provider failed: tasks list and tasks show say so, in
// the table and in --json, with a real worker whose email provider fails.
func TestTasksShowCallFailure(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	db := []string{"--database-url", url}
	pool := openPool(t, url)
	ctx := t.Context()
	provider := taskorch.ChannelProviderFunc(func(context.Context, taskorch.ChannelCall) (json.RawMessage, error) {
		return nil, errors.New("connection refused")
	})
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		Channels:     map[string]taskorch.ChannelProvider{taskorch.TypeEmail: provider},
		PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond, ID: "cli-call-failure",
	})
	require.NoError(t, err)
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(wctx) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-stopped)
	})
	// A task may name only a function that exists (docs/security.md); the call fails before it runs.
	_, err = pool.Exec(ctx, `create schema biz; create function biz.never_called(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$`)
	require.NoError(t, err)
	id := enqueue(t, pool, "email", `{"to": "ada@example.com", "success_handler": "biz.never_called"}`, 3)
	waitStatus(t, pool, id, "completed")

	r := run(t, append([]string{"tasks", "list", "--type", "email"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Regexp(t, `(?m)^`+itoa(id)+` +email +completed · provider failed +1/3 .* email provider: connection refused$`, r.out)

	r = run(t, append([]string{"tasks", "show", itoa(id)}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Regexp(t, `(?m)^status +completed · provider failed$`, r.out)
	require.Regexp(t, `(?m)^call error +email provider: connection refused$`, r.out)

	shown := runJSON[struct{ Task taskorch.Task }](t, append([]string{"tasks", "show", itoa(id)}, db...)...)
	require.Equal(t, taskorch.StatusCompleted, shown.Task.Status)
	require.Equal(t, taskorch.CallFailureProvider, *shown.Task.CallFailure)
	require.Equal(t, "email provider: connection refused", *shown.Task.LastError)
}
