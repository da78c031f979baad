package processtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// breaking is an email provider that accepts every message until it breaks.
type breaking struct{ broken atomic.Bool }

func (b *breaking) Call(context.Context, taskorch.ChannelCall) (json.RawMessage, error) {
	if b.broken.Load() {
		return nil, errors.New("smtp: 451 try again later")
	}
	return json.RawMessage(`{"id":"accepted"}`), nil
}

// The facts helpers count the current run only (docs/processes.md, "Retrying a failed process"):
// run 1's attempt succeeded (the provider accepted the email) and the run failed on a bounce;
// retried by hand, run 2 fails all its attempts, and the email is stuck, run 1's success
// notwithstanding.
func TestFactsHelpersCountTheCurrentRun(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 2)
	mustExec(t, pool, `update comms.process_config set delivery_wait = '1 hour' where process = 'send_email'`)
	email := &breaking{}
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: email})

	id := scalar[int64](t, pool, `select comms.send_email('gone@example.com', 'Hi', 'text')`)
	waitTrue(t, pool, "run 1's attempt accepted", `select comms.has_send_email_succeeded_attempt($1)`, id)
	mustExec(t, pool, `select comms.record_email_delivery(s.provider_response ->> 'id', 'email.bounced', 'Mailbox does not exist', '{}')
		from comms.send_email_attempt a join comms.send_email_attempt_succeeded s using (send_email_attempt_id)
		where a.send_email_task_id = $1`, id)
	waitTrue(t, pool, "run 1 failed on the bounce", `select exists (select 1 from comms.send_email_task_failed where send_email_task_id = $1)`, id)
	quiet(t, pool, "send_email_task_id", id)
	require.False(t, scalar[bool](t, pool, `select comms.is_send_email_stuck($1)`, id), "run 1 failed by its report, not stuck")

	email.broken.Store(true)
	mustExec(t, pool, `select queues.retry_process('comms.send_email', $1, 'the mailbox exists again')`, id)
	waitTrue(t, pool, "run 2's failure", `select exists (select 1 from comms.send_email_task_failed where send_email_task_id = $1 and run = 2)`, id)
	quiet(t, pool, "send_email_task_id", id)

	require.False(t, scalar[bool](t, pool, `select comms.has_send_email_succeeded_attempt($1)`, id), "run 1's success is not run 2's")
	require.Equal(t, 2, scalar[int](t, pool, `select comms.count_send_email_attempts($1)`, id))
	require.Equal(t, 2, scalar[int](t, pool, `select comms.count_send_email_failed_attempts($1)`, id))
	require.True(t, scalar[bool](t, pool, `select comms.is_send_email_stuck($1)`, id), "run 2 failed 2 of 2 attempts")
	require.Equal(t, 3, scalar[int](t, pool, `select count(*)::int from comms.send_email_attempt where send_email_task_id = $1`, id),
		"every run's attempts are kept")
}
