package providers_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/dbtest"
	"github.com/taskorch/taskorch/providers"
)

func TestOutboxRecords(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	email, err := providers.NewOutbox(tx, taskorch.TypeEmail)
	require.NoError(t, err)
	req := `{"to":"ada@example.com","subject":"Welcome","text":"Hello","message_id":5,"send_email_attempt_id":7}`
	resp, err := email.Call(t.Context(), call(t, req))
	require.NoError(t, err)
	out := decode(t, resp)
	require.Equal(t, "outbox", out["provider"])
	id := int64(out["outbox_message_id"].(float64))

	var taskID *int64
	var channel, recipient, status string
	var recorded json.RawMessage
	require.NoError(t, tx.QueryRow(t.Context(), `select task_id, channel, recipient, status, request
		from queues.outbox_message where outbox_message_id = $1`, id).Scan(&taskID, &channel, &recipient, &status, &recorded))
	require.Equal(t, int64(42), *taskID)
	require.Equal(t, []string{"email", "ada@example.com", "sent"}, []string{channel, recipient, status})
	require.JSONEq(t, req, string(recorded), "the request is recorded as it came, extra fields included")

	files, err := providers.NewOutbox(tx, taskorch.TypeFileDelete)
	require.NoError(t, err)
	c := call(t, `{"bucket":"uploads","object_key":"users/7/a.png"}`)
	c.Task = nil
	resp, err = files.Call(t.Context(), c)
	require.NoError(t, err)
	id = int64(decode(t, resp)["outbox_message_id"].(float64))
	require.NoError(t, tx.QueryRow(t.Context(), `select task_id, recipient from queues.outbox_message where outbox_message_id = $1`,
		id).Scan(&taskID, &recipient))
	require.Nil(t, taskID)
	require.Equal(t, "uploads/users/7/a.png", recipient)
}

func TestOutboxFailures(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	_, err := tx.Exec(t.Context(), `insert into queues.outbox_rule (channel, recipient, fail, error_message) values
		('sms', '+15550000001', 'always', 'carrier rejected the number'),
		('sms', '+15550000002', 'once', 'temporary carrier error')`)
	require.NoError(t, err)
	sms, err := providers.NewOutbox(tx, taskorch.TypeSMS)
	require.NoError(t, err)

	for range 2 {
		_, err = sms.Call(t.Context(), call(t, `{"to":"+15550000001","body":"hi"}`))
		pe := requireRetriable(t, err)
		require.Equal(t, "outbox: carrier rejected the number", pe.Error())
	}
	_, err = sms.Call(t.Context(), call(t, `{"to":"+15550000002","body":"hi"}`))
	require.EqualError(t, requireRetriable(t, err), "outbox: temporary carrier error")
	_, err = sms.Call(t.Context(), call(t, `{"to":"+15550000002","body":"hi"}`))
	require.NoError(t, err, "a rule that fails once lets the second delivery through")

	var failed, sent int
	require.NoError(t, tx.QueryRow(t.Context(), `select count(*) filter (where status = 'failed'), count(*) filter (where status = 'sent')
		from queues.outbox_message where channel = 'sms'`).Scan(&failed, &sent))
	require.Equal(t, []int{3, 1}, []int{failed, sent})
}

func TestOutboxChecksRequests(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	for channel, req := range map[string]string{
		taskorch.TypeEmail:      `{"subject":"s","text":"t"}`,
		taskorch.TypeSMS:        `{"to":"+15551234567"}`,
		taskorch.TypeFileDelete: `{"bucket":"b"}`,
	} {
		p, err := providers.NewOutbox(tx, channel)
		require.NoError(t, err)
		_, err = p.Call(t.Context(), call(t, req))
		requirePermanent(t, err)
		require.ErrorContains(t, err, "outbox: bad request: ")
	}
	var n int
	require.NoError(t, tx.QueryRow(t.Context(), `select count(*) from queues.outbox_message`).Scan(&n))
	require.Zero(t, n)

	_, err := providers.NewOutbox(tx, "fax")
	require.ErrorContains(t, err, `unknown channel "fax"`)
	_, err = providers.NewOutbox(nil, taskorch.TypeEmail)
	require.ErrorContains(t, err, "needs a database")
}
