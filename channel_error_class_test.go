package taskorch_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/testfixtures"
)

// The error handler hears each failure's class: "permanent" for a provider's Discard (retrying
// the same request cannot succeed: the supervisor ends its process at once), "retriable" for a
// plain provider error, a before handler's refusal and a channel without a provider
// (docs/processes.md, "Permanent failures").
func TestChannelErrorHandlerGetsErrorClass(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	mustExec(t, pool, testfixtures.WorkerSQL)
	provider := taskorch.ChannelProviderFunc(func(_ context.Context, call taskorch.ChannelCall) (json.RawMessage, error) {
		var req struct {
			To string `json:"to_address"`
		}
		if err := json.Unmarshal(call.Request, &req); err != nil {
			return nil, err
		}
		if req.To == "unknown@example.com" {
			return nil, taskorch.Discard(errors.New("550 5.1.1 recipient rejected"))
		}
		return nil, errors.New("503 try later")
	})
	// ClaimUnknownTypes: the worker claims the sms task although it has no sms provider, to
	// record the "no provider" failure (docs/worker.md, "Which tasks a worker claims").
	startWorker(t, pool, &taskorch.WorkerConfig{Channels: map[string]taskorch.ChannelProvider{taskorch.TypeEmail: provider}, ClaimUnknownTypes: true})

	handlers := `"before_handler": "wbiz.before", "success_handler": "wbiz.on_success", "error_handler": "wbiz.on_error"`
	var ids []int64
	for _, p := range []string{
		`{"to": "unknown@example.com", "attempt_id": 1, ` + handlers + `}`,
		`{"to": "down@example.com", "attempt_id": 2, ` + handlers + `}`,
		`{"attempt_id": 3, ` + handlers + `}`, // the before handler refuses: no recipient
	} {
		res, err := c.Enqueue(ctx, raw("email", p), nil)
		require.NoError(t, err)
		ids = append(ids, res.TaskID)
	}
	res, err := c.Enqueue(ctx, raw("sms", `{"to": "+15550100", "attempt_id": 4, `+handlers+`}`), nil)
	require.NoError(t, err)
	ids = append(ids, res.TaskID)
	for _, id := range ids {
		waitStatus(t, pool, id, taskorch.StatusCompleted)
	}

	type heard struct{ Error, Class string }
	got := map[string]heard{}
	rows, err := pool.Query(ctx, `select body #>> '{original_payload,attempt_id}', body ->> 'error', body ->> 'error_class'
		from wbiz.channel_fact where kind = 'error'`)
	require.NoError(t, err)
	for rows.Next() {
		var attempt string
		var h heard
		require.NoError(t, rows.Scan(&attempt, &h.Error, &h.Class))
		got[attempt] = h
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]heard{
		"1": {"email provider: 550 5.1.1 recipient rejected", "permanent"},
		"2": {"email provider: 503 try later", "retriable"},
		"3": {"before handler wbiz.before: validation failure: no recipient", "retriable"},
		"4": {"no provider is configured for the sms channel on this worker (see TASKORCH_SMS_PROVIDER)", "retriable"},
	}, got)
}
