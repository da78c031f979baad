package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/dashboard"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// TestChannelCallFailureShown runs a real worker whose email provider fails for one address:
// the task owned by a supervisor is completed all the same (its supervisor retries), and the
// task list, the task's page and the overview's failure rate say that its provider failed,
// while the task whose call succeeded stays a plain completion.
func TestChannelCallFailureShown(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 8})
	ctx := t.Context()
	provider := taskorch.ChannelProviderFunc(func(_ context.Context, call taskorch.ChannelCall) (json.RawMessage, error) {
		if strings.Contains(string(call.Request), "down@example.com") {
			return nil, errors.New("503 mailbox service unavailable")
		}
		return json.RawMessage(`{"id": "sent"}`), nil
	})
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		Channels:     map[string]taskorch.ChannelProvider{taskorch.TypeEmail: provider},
		PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond, ID: "call-failure-worker",
	})
	require.NoError(t, err)
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(wctx) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-stopped)
	})

	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	sent, err := c.Enqueue(ctx, taskorch.RawArgs{Type: "email", Payload: json.RawMessage(`{"to": "ada@example.com"}`)}, nil)
	require.NoError(t, err)
	// A success handler makes the task a supervisor's: its failure is recorded, the task completed.
	// (It must exist to be named, docs/security.md; the failed call never reaches it.)
	_, err = pool.Exec(ctx, `create schema biz; create function biz.never_called(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$`)
	require.NoError(t, err)
	down, err := c.Enqueue(ctx, taskorch.RawArgs{Type: "email",
		Payload: json.RawMessage(`{"to": "down@example.com", "success_handler": "biz.never_called"}`)}, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(ctx, `select count(*) from queues.task where task_id = any ($1) and status = 'completed'`,
			[]int64{sent.TaskID, down.TaskID}).Scan(&n)
		return err == nil && n == 2
	}, 30*time.Second, 20*time.Millisecond)

	h, err := dashboard.New(pool, dashboard.Config{Token: testToken, RefreshInterval: -1})
	require.NoError(t, err)
	base := newServer(t, h).URL
	hc := browserlessClient(t)

	code, body, _ := get(t, hc, base+"/tasks?type=email", bearer()...)
	require.Equal(t, http.StatusOK, code)
	downRow, sentRow := taskRowHTML(t, body, down.TaskID), taskRowHTML(t, body, sent.TaskID)
	require.Contains(t, downRow, `<span class="st st-completed">completed</span>`)
	require.Contains(t, downRow, `data-call-failure="provider_error"`)
	require.Contains(t, downRow, ">provider failed</span>")
	require.Contains(t, downRow, "email provider: 503 mailbox service unavailable")
	require.Contains(t, sentRow, `<span class="st st-completed">completed</span>`)
	require.NotContains(t, sentRow, "data-call-failure")

	code, body, _ = get(t, hc, base+"/tasks/"+itoa(down.TaskID), bearer()...)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `data-call-failure="provider_error"`)
	require.Contains(t, body, "<dt>call error</dt>")
	require.Contains(t, body, "email provider: 503 mailbox service unavailable")

	// One completion and one failed call in the window: the rate counts the failed call.
	code, body, _ = get(t, hc, base+"/?window=15m", bearer()...)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "failure rate 50.0%")
}

// taskRowHTML is the task list's row of task id.
func taskRowHTML(t *testing.T, body string, id int64) string {
	t.Helper()
	start := strings.Index(body, `<tr data-task-id="`+itoa(id)+`">`)
	require.GreaterOrEqual(t, start, 0, "task %d is listed", id)
	end := strings.Index(body[start:], "</tr>")
	require.Positive(t, end)
	return body[start : start+end]
}
