package scaffold_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/scaffold"
)

// A generated channel process ends at once on a permanent failure (the provider's Discard:
// docs/processes.md, "Permanent failures"), after exactly one attempt and with a failure that
// says so; a retriable failure is retried within the budget; and the failed instance can still
// be retried by hand once the cause is fixed.
func TestGeneratedChannelProcessPermanentFailure(t *testing.T) {
	t.Parallel()
	p := scaffold.Process{Name: "send_reminder", Schema: "crm", Key: "customer_id", Channel: taskorch.TypeEmail, MaxAttempts: 3}
	pool := apply(t, p)
	var fixed atomic.Bool
	var calls42, calls43 atomic.Int32
	run(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: taskorch.ChannelProviderFunc(
		func(_ context.Context, c taskorch.ChannelCall) (json.RawMessage, error) {
			var req struct {
				CustomerID int64 `json:"customer_id"`
			}
			if err := json.Unmarshal(c.Request, &req); err != nil {
				return nil, err
			}
			switch {
			case req.CustomerID == 42 && !fixed.Load():
				calls42.Add(1)
				return nil, taskorch.Discard(errors.New("550 5.1.1 recipient rejected"))
			case req.CustomerID == 43 && calls43.Add(1) == 1:
				return nil, errors.New("451 4.3.0 try again")
			}
			return json.RawMessage(`{"id":"m-1"}`), nil
		})})

	rejected := scalar[int64](t, pool, `select send_reminder_task_id from crm.kickoff_send_reminder(42)`)
	flaky := scalar[int64](t, pool, `select send_reminder_task_id from crm.kickoff_send_reminder(43)`)
	waitTrue(t, pool, "the permanent failure ends the process",
		`select exists (select 1 from crm.send_reminder_task_failed where send_reminder_task_id = $1)`, rejected)
	waitTrue(t, pool, "the retriable failure is retried", `select exists (select 1 from crm.send_reminder_task_succeeded where send_reminder_task_id = $1)`, flaky)
	waitTrue(t, pool, "the failed instance leaves the agenda", `select not exists (select 1 from crm.send_reminder_due where send_reminder_task_id = $1)`, rejected)

	require.Equal(t, 1, scalar[int](t, pool, `select crm.count_send_reminder_attempts($1)`, rejected), "exactly one attempt")
	require.EqualValues(t, 1, calls42.Load())
	require.Equal(t, "permanent: send_reminder not done: email provider: 550 5.1.1 recipient rejected",
		scalar[string](t, pool, `select error_message from crm.send_reminder_task_failed where send_reminder_task_id = $1`, rejected))
	require.Equal(t, "permanent", scalar[string](t, pool, `select f.error_class from crm.send_reminder_attempt a
		join crm.send_reminder_attempt_failed f using (send_reminder_attempt_id) where a.send_reminder_task_id = $1`, rejected))
	require.True(t, scalar[bool](t, pool, `select crm.has_send_reminder_permanent_failure($1) and crm.is_send_reminder_stuck($1)`, rejected))
	require.Equal(t, "failed 1 permanent: send_reminder not done: email provider: 550 5.1.1 recipient rejected", scalar[string](t, pool, `
		select state || ' ' || attempts || ' ' || error from queues.process_instances(_process => 'crm.send_reminder') where instance_id = $1`, rejected))

	require.Equal(t, 2, scalar[int](t, pool, `select crm.count_send_reminder_attempts($1)`, flaky))
	require.Equal(t, []string{"retriable"}, scalar[[]string](t, pool, `select array_agg(f.error_class) from crm.send_reminder_attempt a
		join crm.send_reminder_attempt_failed f using (send_reminder_attempt_id) where a.send_reminder_task_id = $1`, flaky))
	require.False(t, scalar[bool](t, pool, `select crm.has_send_reminder_permanent_failure($1) or crm.is_send_reminder_stuck($1)`, flaky))

	// The address was corrected: a retry by hand starts run 2, which the permanent failure of
	// run 1 does not end.
	fixed.Store(true)
	require.Equal(t, 2, scalar[int](t, pool, `select run from queues.retry_process('crm.send_reminder', $1, 'address corrected')`, rejected))
	require.False(t, scalar[bool](t, pool, `select crm.has_send_reminder_permanent_failure($1) or crm.is_send_reminder_stuck($1)`, rejected))
	waitTrue(t, pool, "run 2 succeeds", `select exists (select 1 from crm.send_reminder_task_succeeded where send_reminder_task_id = $1)`, rejected)
	require.Equal(t, "succeeded 2", scalar[string](t, pool, `
		select state || ' ' || attempts from queues.process_instances(_process => 'crm.send_reminder') where instance_id = $1`, rejected))
}
