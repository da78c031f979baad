package processtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// scripted is a channel provider whose calls fail or succeed in a given order, and which keeps
// what it was asked to send.
type scripted struct {
	mu       sync.Mutex
	failures []error // the n-th call returns failures[n] (nil: success); calls past the end succeed
	calls    []call
}

type call struct {
	at      time.Time
	request map[string]any
	key     string
}

func (s *scripted) Call(_ context.Context, c taskorch.ChannelCall) (json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var req map[string]any
	if err := json.Unmarshal(c.Request, &req); err != nil {
		return nil, taskorch.Discard(err)
	}
	n := len(s.calls)
	s.calls = append(s.calls, call{at: time.Now(), request: req, key: c.IdempotencyKey})
	if n < len(s.failures) && s.failures[n] != nil {
		return nil, s.failures[n]
	}
	return json.RawMessage(`{"provider":"scripted","id":"msg-` + time.Now().Format("150405.000000") + `"}`), nil
}

func (s *scripted) Calls() []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]call(nil), s.calls...)
}

// The story of docs/processes.md's walkthrough: send_email -> supervisor -> attempt 1 fails at the provider -> failure fact
// -> attempt 2 -> success -> the supervisor stops. Exactly 2 attempts, 1 failed, 1 succeeded,
// and nothing more is enqueued.
func TestSendEmailStory(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 2) // "The process allows one retry."
	email := &scripted{failures: []error{errors.New("resend: 503 service unavailable")}}
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: email})

	id := scalar[int64](t, pool, `select comms.send_email('ann@example.com', 'Welcome', 'Hello Ann', '<p>Hello Ann</p>')`)
	waitTrue(t, pool, "the terminal success fact",
		`select exists (select 1 from comms.send_email_task_succeeded where send_email_task_id = $1)`, id)
	quiet(t, pool, "send_email_task_id", id)

	require.Equal(t, 2, scalar[int](t, pool, `select comms.count_send_email_attempts($1)`, id))
	require.Equal(t, 1, scalar[int](t, pool, `select comms.count_send_email_failed_attempts($1)`, id))
	require.True(t, scalar[bool](t, pool, `select comms.has_send_email_succeeded_attempt($1)`, id))
	require.False(t, scalar[bool](t, pool, `select comms.is_send_email_stuck($1)`, id))
	require.Equal(t, "resend: 503 service unavailable", scalar[string](t, pool,
		`select f.error_message from comms.send_email_attempt a join comms.send_email_attempt_failed f using (send_email_attempt_id)
		 where a.send_email_task_id = $1`, id)[len("email provider: "):])
	require.False(t, scalar[bool](t, pool, `select exists (select 1 from comms.send_email_task_failed where send_email_task_id = $1)`, id))

	// Two email tasks, both completed (the supervisor, not the worker, retried).
	require.Equal(t, []string{"completed", "completed"}, scalar[[]string](t, pool,
		`select array_agg(status::text order by task_id) from queues.task where task_type = 'email' and (payload ->> 'send_email_task_id')::bigint = $1`, id))
	// Every supervisor run completed; none is left.
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from queues.task
		where task_type = 'db_function' and (payload ->> 'send_email_task_id')::bigint = $1 and status <> 'completed'`, id))

	calls := email.Calls()
	require.Len(t, calls, 2)
	for _, c := range calls {
		require.Equal(t, "ann@example.com", c.request["to"])
		require.Equal(t, "Welcome", c.request["subject"])
		require.Equal(t, "Hello Ann", c.request["text"])
		require.Equal(t, "<p>Hello Ann</p>", c.request["html"])
	}
	// Each attempt has its own idempotency key.
	require.NotEqual(t, calls[0].request["idempotency_key"], calls[1].request["idempotency_key"])

	// Nothing more happens: another supervisor run (as a stray duplicate would be) is a no-op.
	mustExec(t, pool, `select queues.enqueue('db_function', jsonb_build_object('db_function', 'comms.send_email_supervisor', 'send_email_task_id', $1::bigint))`, id)
	quiet(t, pool, "send_email_task_id", id)
	require.Equal(t, 2, scalar[int](t, pool, `select comms.count_send_email_attempts($1)`, id))
	require.Len(t, email.Calls(), 2)
}

// The same for SMS.
func TestSendSMSStory(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 2)
	sms := &scripted{failures: []error{errors.New("twilio: 500")}}
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeSMS: sms})

	id := scalar[int64](t, pool, `select comms.send_sms('+15551234567', 'Your code is 123456')`)
	waitTrue(t, pool, "the terminal success fact",
		`select exists (select 1 from comms.send_sms_task_succeeded where send_sms_task_id = $1)`, id)
	quiet(t, pool, "send_sms_task_id", id)
	require.Equal(t, 2, scalar[int](t, pool, `select comms.count_send_sms_attempts($1)`, id))
	require.Equal(t, 1, scalar[int](t, pool, `select comms.count_send_sms_failed_attempts($1)`, id))
	require.True(t, scalar[bool](t, pool, `select comms.has_send_sms_succeeded_attempt($1)`, id))
	calls := sms.Calls()
	require.Len(t, calls, 2)
	require.Equal(t, "+15551234567", calls[1].request["to"])
	require.Equal(t, "Your code is 123456", calls[1].request["body"])
}

// A scheduled send is not sent before its time.
func TestScheduledSendWaitsForItsTime(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 2)
	email := &scripted{}
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: email})

	at := scalar[time.Time](t, pool, `select now() + interval '1500 ms'`)
	id := scalar[int64](t, pool, `select comms.send_email('bob@example.com', 'Later', 'at a precise time', null, $1)`, at)
	// Meanwhile an early supervisor run (as after a restart) must not send it either.
	mustExec(t, pool, `select queues.enqueue('db_function', jsonb_build_object('db_function', 'comms.send_email_supervisor', 'send_email_task_id', $1::bigint))`, id)
	waitTrue(t, pool, "sent", `select comms.has_send_email_succeeded_attempt($1)`, id)
	calls := email.Calls()
	require.Len(t, calls, 1)
	dbNow := scalar[time.Time](t, pool, `select created_at from comms.send_email_attempt where send_email_task_id = $1`, id)
	require.False(t, dbNow.Before(at), "the attempt was made at %s, before its time %s", dbNow, at)
}

// Attempts exhausted: the process records its terminal failure, naming the last error, and stops.
func TestSendEmailGivesUp(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 3)
	boom := errors.New("smtp: 554 mailbox unavailable")
	email := &scripted{failures: []error{boom, boom, boom, boom}}
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: email})

	id := scalar[int64](t, pool, `select comms.send_email('gone@example.com', 'Hi', 'text')`)
	waitTrue(t, pool, "the terminal failure fact",
		`select exists (select 1 from comms.send_email_task_failed where send_email_task_id = $1)`, id)
	quiet(t, pool, "send_email_task_id", id)
	require.Equal(t, 3, scalar[int](t, pool, `select comms.count_send_email_attempts($1)`, id))
	require.True(t, scalar[bool](t, pool, `select comms.is_send_email_stuck($1)`, id))
	require.Contains(t, scalar[string](t, pool, `select error_message from comms.send_email_task_failed where send_email_task_id = $1`, id),
		"email not sent after 3 failed attempts (max 3); last error: email provider: smtp: 554 mailbox unavailable")
	require.Len(t, email.Calls(), 3)
}

// Bad input: the kickoff answers with validation_failure_message; send_email raises a clear
// 22023; a supervisor run for an unknown id fails its task with the message, not retried.
func TestCommsBadInput(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ctx := context.Background()

	require.Equal(t, "kickoff_send_email: message_id is required",
		scalar[string](t, pool, `select validation_failure_message from comms.kickoff_send_email(null)`))
	require.Equal(t, "kickoff_send_email: email message 999 does not exist",
		scalar[string](t, pool, `select validation_failure_message from comms.kickoff_send_email(999)`))
	require.Equal(t, "kickoff_send_sms: sms message 999 does not exist",
		scalar[string](t, pool, `select validation_failure_message from comms.kickoff_send_sms(999)`))
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from queues.task`), "a refused kickoff enqueues nothing")

	for _, tc := range []struct{ sql, msg string }{
		{`select comms.send_email('not-an-address', 's', 't')`, "_to must be one email address"},
		{`select comms.send_email('a@example.com', '', 't')`, "_subject must be one non-empty line"},
		{`select comms.send_email('a@example.com', e'two\nlines', 't')`, "_subject must be one non-empty line"},
		{`select comms.send_email('a@example.com', 's')`, "give _text, _html or both"},
		{`select comms.send_sms('555-1234', 'x')`, "E.164"},
		{`select comms.send_sms('+15551234567', '')`, "_body must be 1 to 1600 characters"},
	} {
		_, err := pool.Exec(ctx, tc.sql)
		require.ErrorContains(t, err, tc.msg, tc.sql)
		require.ErrorContains(t, err, "SQLSTATE 22023", tc.sql)
	}

	// Kickoff is idempotent per message.
	id := scalar[int64](t, pool, `select comms.send_email('a@example.com', 's', 't')`)
	msg := scalar[int64](t, pool, `select message_id from comms.send_email_task where send_email_task_id = $1`, id)
	require.Equal(t, id, scalar[int64](t, pool, `select send_email_task_id from comms.kickoff_send_email($1)`, msg))
	require.Equal(t, 1, scalar[int](t, pool, `select count(*)::int from queues.task where task_type = 'db_function'`))

	// An unknown id reaching the supervisor: the task fails with the message and is not retried.
	bad := scalar[int64](t, pool, `select queues.enqueue('db_function', '{"db_function":"comms.send_email_supervisor","send_email_task_id":424242}')`)
	startWorker(t, pool, map[string]taskorch.ChannelProvider{})
	waitTrue(t, pool, "the bad supervisor task to fail", `select status = 'failed' from queues.task where task_id = $1`, bad)
	require.Contains(t, scalar[string](t, pool, `select last_error from queues.task where task_id = $1`, bad),
		"send_email_supervisor: send_email_task 424242 does not exist")
}
