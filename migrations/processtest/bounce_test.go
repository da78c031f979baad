package processtest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// With comms.process_config.delivery_wait set, an email the provider accepted waits for its
// delivery report: a bounce ends the process as failed with the provider's reason, a delivery
// as succeeded, and no report within the wait as succeeded too. Each process has exactly one
// terminal fact.
func TestEmailDeliveryReportEndsProcess(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 2)
	mustExec(t, pool, `update comms.process_config set delivery_wait = '1 hour' where process = 'send_email'`)
	email := &scripted{}
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: email})

	bounced := scalar[int64](t, pool, `select comms.send_email('gone@example.com', 'Hi', 'text')`)
	delivered := scalar[int64](t, pool, `select comms.send_email('ann@example.com', 'Hi', 'text')`)
	providerID := func(id int64) string {
		t.Helper()
		waitTrue(t, pool, "the provider accepted the email", `select exists (select 1 from comms.send_email_attempt a
			join comms.send_email_attempt_succeeded s using (send_email_attempt_id) where a.send_email_task_id = $1)`, id)
		return scalar[string](t, pool, `select s.provider_response ->> 'id' from comms.send_email_attempt a
			join comms.send_email_attempt_succeeded s using (send_email_attempt_id) where a.send_email_task_id = $1`, id)
	}
	bouncedID, deliveredID := providerID(bounced), providerID(delivered)
	terminal := `select (select count(*) from comms.send_email_task_succeeded where send_email_task_id = $1)
		+ (select count(*) from comms.send_email_task_failed where send_email_task_id = $1)`
	require.Zero(t, scalar[int64](t, pool, terminal, bounced), "accepted is not delivered: the process waits for the report")
	require.True(t, scalar[bool](t, pool, `select due_at > now() + interval '50 minutes' from comms.send_email_due where send_email_task_id = $1`, bounced))

	start := time.Now()
	mustExec(t, pool, `select comms.record_email_delivery($1, 'email.bounced', 'Mailbox does not exist', '{}')`, bouncedID)
	waitTrue(t, pool, "the bounce ends the process", `select exists (select 1 from comms.send_email_task_failed where send_email_task_id = $1)`, bounced)
	t.Logf("bounce to terminal failure: %s", time.Since(start))
	require.Equal(t, "the provider reported the email bounced: Mailbox does not exist",
		scalar[string](t, pool, `select error_message from comms.send_email_task_failed where send_email_task_id = $1`, bounced))

	mustExec(t, pool, `select comms.record_email_delivery($1, 'email.delivered', null, '{}')`, deliveredID)
	waitTrue(t, pool, "the delivery ends the process", `select exists (select 1 from comms.send_email_task_succeeded where send_email_task_id = $1)`, delivered)

	// No report within the wait: the process ends succeeded when the wait is over.
	mustExec(t, pool, `update comms.process_config set delivery_wait = '300 ms' where process = 'send_email'`)
	silent := scalar[int64](t, pool, `select comms.send_email('quiet@example.com', 'Hi', 'text')`)
	providerID(silent)
	waitTrue(t, pool, "the wait ends the process", `select exists (select 1 from comms.send_email_task_succeeded where send_email_task_id = $1)`, silent)

	for _, id := range []int64{bounced, delivered, silent} {
		quiet(t, pool, "send_email_task_id", id)
		require.Equal(t, int64(1), scalar[int64](t, pool, terminal, id), "one terminal fact for process %d", id)
		require.Equal(t, 1, scalar[int](t, pool, `select comms.count_send_email_attempts($1)`, id), "no second attempt")
	}
	// A report after the end changes nothing but its fact.
	mustExec(t, pool, `select comms.record_email_delivery($1, 'email.complained', null, '{}')`, deliveredID)
	quiet(t, pool, "send_email_task_id", delivered)
	require.Equal(t, int64(1), scalar[int64](t, pool, terminal, delivered))
	require.Len(t, email.Calls(), 3)
}
