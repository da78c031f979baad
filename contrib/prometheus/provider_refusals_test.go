package prometheus_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	taskorchprom "github.com/taskorch/taskorch/contrib/prometheus"
)

// A channel task whose provider refuses the call for good (a Discard) is counted in
// taskorch_provider_refusals_total, whose series for the worker's channels exist from the start;
// a provider's retriable failure, even one that ends the task dead, is not a refusal. (A task
// owned by a process, whose error handler records the refusal, is counted too: cmd/taskorch's
// TestE2EAlertRules, with a real mail server.)
func TestProviderRefusalsCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	noRetryDelay(t, pool)
	reg := prometheus.NewRegistry()
	sms := taskorch.ChannelProviderFunc(func(_ context.Context, call taskorch.ChannelCall) (json.RawMessage, error) {
		var req struct {
			To string `json:"to"`
		}
		if err := json.Unmarshal(call.Request, &req); err != nil {
			return nil, err
		}
		switch req.To {
		case "invalid":
			return nil, taskorch.Discard(errors.New("21211: invalid 'To' phone number"))
		case "busy":
			return nil, errors.New("503: try again later")
		}
		return json.RawMessage(`{"sid": "SM1"}`), nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{
		Channels: map[string]taskorch.ChannelProvider{"sms": sms}, Observers: []taskorch.Observer{taskorchprom.New(reg)},
	})
	got := gather(t, reg)
	require.Contains(t, got, `taskorch_provider_refusals_total{task_type="sms"}`, "served at 0 from the start")
	require.Zero(t, got[`taskorch_provider_refusals_total{task_type="sms"}`])

	enq := func(to string, maxAttempts int) int64 {
		res, err := c.Enqueue(ctx, raw("sms", `{"to": "`+to+`"}`), &taskorch.EnqueueOpts{MaxAttempts: maxAttempts})
		require.NoError(t, err)
		return res.TaskID
	}
	invalid := enq("invalid", 3)
	busy := enq("busy", 2)
	sent := enq("+15550100", 1)
	waitStatus(t, pool, invalid, taskorch.StatusFailed)
	waitStatus(t, pool, busy, taskorch.StatusDead)
	waitStatus(t, pool, sent, taskorch.StatusCompleted)

	want := map[string]float64{
		`taskorch_provider_refusals_total{task_type="sms"}`:             1,
		`taskorch_tasks_failed_total{outcome="failed",task_type="sms"}`: 1,
		`taskorch_tasks_failed_total{outcome="dead",task_type="sms"}`:   1,
		`taskorch_tasks_failed_total{outcome="retry",task_type="sms"}`:  1,
		`taskorch_tasks_completed_total{task_type="sms"}`:               1,
	}
	require.Eventually(t, func() bool {
		got = gather(t, reg)
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond, "the outcomes are observed once committed")
	for k, v := range want {
		require.Equal(t, v, got[k], k)
	}
}
