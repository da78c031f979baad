package providers_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
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

// Over a pool, concurrent calls are recorded together (queues.record_outbox_messages) and each
// gets its own answer: its own message id, a ruled recipient's failure, a malformed request's
// refusal; the rest are recorded once each.
func TestOutboxOnPoolRecordsConcurrentCallsTogether(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	_, err := pool.Exec(t.Context(), `insert into queues.outbox_rule (channel, recipient, fail, error_message)
		values ('email', 'bounce@example.com', 'always', 'mailbox full')`)
	require.NoError(t, err)
	email, err := providers.NewOutbox(pool, taskorch.TypeEmail)
	require.NoError(t, err)

	const n = 60
	type answer struct {
		id  int64
		err error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			to := fmt.Sprintf("user%d@example.com", i)
			switch i {
			case 10:
				to = "bounce@example.com"
			case 20:
				to = "" // refused by the provider's own check, before any recording
			}
			c := call(t, map[string]any{"to": to, "subject": "s", "text": "t", "n": i})
			resp, err := email.Call(t.Context(), c)
			if err == nil {
				var out struct {
					OutboxMessageID int64 `json:"outbox_message_id"`
				}
				err = json.Unmarshal(resp, &out)
				answers[i].id = out.OutboxMessageID
			}
			answers[i].err = err
		}()
	}
	wg.Wait()

	ids := map[int64]bool{}
	for i, a := range answers {
		switch i {
		case 10:
			require.EqualError(t, requireRetriable(t, a.err), "outbox: mailbox full")
		case 20:
			requirePermanent(t, a.err)
		default:
			require.NoError(t, a.err, "call %d", i)
			require.False(t, ids[a.id], "call %d got its own message id", i)
			ids[a.id] = true
			var got int
			require.NoError(t, pool.QueryRow(t.Context(), `select (request ->> 'n')::int from queues.outbox_message
				where outbox_message_id = $1`, a.id).Scan(&got))
			require.Equal(t, i, got, "call %d's id names its own request", i)
		}
	}
	var sent, failed, recordings int
	require.NoError(t, pool.QueryRow(t.Context(), `select count(*) filter (where status = 'sent'),
		count(*) filter (where status = 'failed'), count(distinct xmin::text) from queues.outbox_message`).Scan(&sent, &failed, &recordings))
	require.Equal(t, []int{n - 2, 1}, []int{sent, failed})
	require.Less(t, recordings, n-1, "concurrent calls share transactions")
}

// A batch the server refuses is recorded call by call, so only the call at fault fails: here a
// constraint added for the test makes one recording raise inside its batch.
func TestOutboxBatchRefusedFallsBackToEachCall(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	_, err := pool.Exec(t.Context(), `alter table queues.outbox_message add constraint no_mallory check (recipient <> 'mallory@example.com')`)
	require.NoError(t, err)
	email, err := providers.NewOutbox(pool, taskorch.TypeEmail)
	require.NoError(t, err)
	const n = 30
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			to := fmt.Sprintf("user%d@example.com", i)
			if i == 5 {
				to = "mallory@example.com"
			}
			_, errs[i] = email.Call(t.Context(), call(t, map[string]any{"to": to, "subject": "s", "text": "t"}))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if i == 5 {
			require.ErrorContains(t, err, "no_mallory")
			continue
		}
		require.NoError(t, err, "call %d", i)
	}
	var recorded int
	require.NoError(t, pool.QueryRow(t.Context(), `select count(*) from queues.outbox_message`).Scan(&recorded))
	require.Equal(t, n-1, recorded)
}
