package taskorch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// A paused type is not claimed, other types are, enqueueing goes on, and resuming makes the
// waiting tasks claimable again.
func TestPauseResumeQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)

	a, err := c.Enqueue(ctx, raw("report.build", `{}`), nil)
	require.NoError(t, err)
	changed, err := c.PauseQueue(ctx, "report.build", "ops@example.com")
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = c.PauseQueue(ctx, "report.build", "")
	require.NoError(t, err)
	require.False(t, changed, "pausing twice is a no-op")

	b, err := c.Enqueue(ctx, raw("report.build", `{}`), nil)
	require.NoError(t, err, "enqueueing a paused type goes on")
	other, err := c.Enqueue(ctx, raw("mail.digest", `{}`), nil)
	require.NoError(t, err)

	got := claim(t, pool, "w1", 10, "1 minute")
	require.Len(t, got, 1)
	require.Equal(t, other.TaskID, got[0].TaskID)
	require.Nil(t, scalar[*int64](t, pool, `select task_id from queues.dequeue_next_available_task()`))

	paused, err := c.PausedQueues(ctx)
	require.NoError(t, err)
	require.Len(t, paused, 1)
	require.Equal(t, "report.build", paused[0].TaskType)
	require.Equal(t, "ops@example.com", paused[0].PausedBy)

	changed, err = c.ResumeQueue(ctx, "report.build")
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = c.ResumeQueue(ctx, "report.build")
	require.NoError(t, err)
	require.False(t, changed)

	got = claim(t, pool, "w1", 10, "1 minute")
	require.ElementsMatch(t, []int64{a.TaskID, b.TaskID}, []int64{got[0].TaskID, got[1].TaskID})

	_, err = c.PauseQueue(ctx, " ", "")
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
}

// The dev outbox records deliveries; rules make a recipient fail always, or only the first time.
func TestOutboxRecordsAndRules(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	mustExec(t, pool, `insert into queues.outbox_rule (channel, recipient, fail) values
		('email', 'flaky@example.com', 'once'), ('sms', '+15550000001', 'always')`)

	rec := func(channel, req string) map[string]any {
		return scalar[map[string]any](t, pool, `select queues.record_outbox_message(7, $1, $2::jsonb)`, channel, req)
	}
	require.Equal(t, "sent", rec("email", `{"to":"ann@example.com","subject":"hi"}`)["status"])
	first := rec("email", `{"to":"flaky@example.com","subject":"hi"}`)
	require.Equal(t, "failed", first["status"])
	require.NotEmpty(t, first["error"])
	require.Equal(t, "sent", rec("email", `{"to":"flaky@example.com","subject":"hi"}`)["status"], "once: the second delivery goes through")
	for range 2 {
		require.Equal(t, "failed", rec("sms", `{"to":"+15550000001","body":"x"}`)["status"])
	}
	require.Equal(t, "sent", rec("file_delete", `{"bucket":"b","object_key":"k/1"}`)["status"])
	require.Equal(t, "b/k/1", scalar[string](t, pool,
		`select recipient from queues.outbox_message where channel = 'file_delete'`))
	require.Equal(t, 6, scalar[int](t, pool, `select count(*)::int from queues.outbox_message`))

	_, err := pool.Exec(context.Background(), `select queues.record_outbox_message(1, 'fax', '{}')`)
	require.ErrorContains(t, err, "unknown channel fax")
	_, err = pool.Exec(context.Background(), `update queues.outbox_message set status = 'sent'`)
	require.Error(t, err, "the outbox is append-only")
}
