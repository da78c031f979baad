package processtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// sentEmail makes a send-email process with one attempt the provider accepted under id, as the
// success handler records it: it returns the send_email_task_id and the attempt's id.
func sentEmail(t *testing.T, db taskorch.DBTX, id string) (task, attempt int64) {
	t.Helper()
	task = scalar[int64](t, db, `select comms.send_email('a@example.com', 's', 't')`)
	attempt = scalar[int64](t, db, `insert into comms.send_email_attempt (send_email_task_id) values ($1) returning send_email_attempt_id`, task)
	mustExec(t, db, `insert into comms.send_email_attempt_succeeded (send_email_attempt_id, provider_response)
		values ($1, jsonb_build_object('provider', 'resend', 'id', $2::text))`, attempt, id)
	return task, attempt
}

// sentSMS is sentEmail for an SMS the provider accepted under sid.
func sentSMS(t *testing.T, db taskorch.DBTX, sid string) (task, attempt int64) {
	t.Helper()
	task = scalar[int64](t, db, `select comms.send_sms('+15551234567', 'hi')`)
	attempt = scalar[int64](t, db, `insert into comms.send_sms_attempt (send_sms_task_id) values ($1) returning send_sms_attempt_id`, task)
	mustExec(t, db, `insert into comms.send_sms_attempt_succeeded (send_sms_attempt_id, provider_response)
		values ($1, jsonb_build_object('provider', 'twilio', 'sid', $2::text, 'status', 'queued'))`, attempt, sid)
	return task, attempt
}

// deliveryCounts is every row the delivery functions may write, to prove what a call changed.
func deliveryCounts(t *testing.T, db taskorch.DBTX) []int64 {
	t.Helper()
	return scalar[[]int64](t, db, `select array[
		(select count(*) from comms.send_email_attempt_delivered),
		(select count(*) from comms.send_email_attempt_bounced),
		(select count(*) from comms.send_sms_attempt_delivered),
		(select count(*) from comms.send_sms_attempt_undelivered),
		(select count(*) from queues.signal),
		(select count(*) from queues.error)]`)
}

type deliveryRow struct {
	Outcome string
	Attempt *int64
	Task    *int64
}

func recordEmail(t *testing.T, db taskorch.DBTX, id, event string, reason *string, payload string) deliveryRow {
	t.Helper()
	var r deliveryRow
	require.NoError(t, db.QueryRow(context.Background(),
		`select outcome, send_email_attempt_id, send_email_task_id from comms.record_email_delivery($1, $2, $3, $4::jsonb)`,
		id, event, reason, payload).Scan(&r.Outcome, &r.Attempt, &r.Task))
	return r
}

func ptr[T any](v T) *T { return &v }

// A delivered, a bounced and a complained email each become one fact on the attempt the
// provider's id names and one signal keyed by the process; a repeat changes nothing; the facts
// are append-only.
func TestEmailDeliveryFacts(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	task1, att1 := sentEmail(t, tx, "re_delivered")
	task2, att2 := sentEmail(t, tx, "re_bounced")
	key1, key2 := itoa(task1), itoa(task2)

	r := recordEmail(t, tx, "re_delivered", "email.delivered", nil, `{"type": "email.delivered"}`)
	require.Equal(t, deliveryRow{"recorded", &att1, &task1}, r)
	require.JSONEq(t, `{"type": "email.delivered"}`,
		scalar[string](t, tx, `select payload::text from comms.send_email_attempt_delivered where send_email_attempt_id = $1`, att1))
	require.JSONEq(t, `{"send_email_attempt_id": `+itoa(att1)+`, "provider_message_id": "re_delivered"}`,
		scalar[string](t, tx, `select queues.signal_payload('email.delivered', $1)::text`, key1))

	before := deliveryCounts(t, tx)
	require.Equal(t, "duplicate", recordEmail(t, tx, "re_delivered", "email.delivered", nil, `{"other": 1}`).Outcome)
	require.Equal(t, before, deliveryCounts(t, tx), "a repeated callback writes nothing")

	r = recordEmail(t, tx, "re_bounced", "email.bounced", ptr("550 5.1.1 mailbox does not exist"), `{}`)
	require.Equal(t, deliveryRow{"recorded", &att2, &task2}, r)
	r = recordEmail(t, tx, "re_bounced", "email.complained", nil, `{}`)
	require.Equal(t, "recorded", r.Outcome)
	require.Equal(t, []string{"bounced:550 5.1.1 mailbox does not exist", "complained:"},
		scalar[[]string](t, tx, `select array_agg(kind || ':' || coalesce(reason, '') order by kind)
			from comms.send_email_attempt_bounced where send_email_attempt_id = $1`, att2))
	require.Equal(t, "550 5.1.1 mailbox does not exist",
		scalar[string](t, tx, `select queues.signal_payload('email.bounced', $1) ->> 'reason'`, key2))
	require.True(t, scalar[bool](t, tx, `select queues.signal_payload('email.complained', $1) is not null`, key2))
	require.Nil(t, scalar[*string](t, tx, `select queues.signal_payload('email.delivered', $1)::text`, key2))

	before = deliveryCounts(t, tx)
	require.Equal(t, "duplicate", recordEmail(t, tx, "re_bounced", "email.bounced", ptr("another reason"), `{}`).Outcome)
	require.Equal(t, before, deliveryCounts(t, tx))

	_, err := tx.Exec(context.Background(), `update comms.send_email_attempt_bounced set reason = 'forged'`)
	require.ErrorContains(t, err, "holds facts, which are append-only")
}

// Twilio's delivered, undelivered and failed become SMS facts (with the error code) and
// signals sms.<status>; a repeat changes nothing.
func TestSMSDeliveryFacts(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	ctx := context.Background()
	task1, att1 := sentSMS(t, tx, "SM1")
	task2, att2 := sentSMS(t, tx, "SM2")

	var outcome string
	var attempt, task int64
	require.NoError(t, tx.QueryRow(ctx, `select * from comms.record_sms_delivery('SM1', 'delivered')`).Scan(&outcome, &attempt, &task))
	require.Equal(t, []any{"recorded", att1, task1}, []any{outcome, attempt, task})
	require.True(t, scalar[bool](t, tx, `select queues.signal_payload('sms.delivered', $1) is not null`, itoa(task1)))

	require.Equal(t, "recorded", scalar[string](t, tx,
		`select outcome from comms.record_sms_delivery('SM2', 'undelivered', '30003', 'Unreachable destination handset', '{"MessageStatus": "undelivered"}')`))
	require.Equal(t, "recorded", scalar[string](t, tx, `select outcome from comms.record_sms_delivery('SM2', 'failed', '30008')`))
	require.Equal(t, []string{"failed:30008:", "undelivered:30003:Unreachable destination handset"},
		scalar[[]string](t, tx, `select array_agg(status || ':' || coalesce(error_code, '') || ':' || coalesce(reason, '') order by status)
			from comms.send_sms_attempt_undelivered where send_sms_attempt_id = $1`, att2))
	require.JSONEq(t, `{"send_sms_attempt_id": `+itoa(att2)+`, "provider_message_id": "SM2", "error_code": "30003", "reason": "Unreachable destination handset"}`,
		scalar[string](t, tx, `select queues.signal_payload('sms.undelivered', $1)::text`, itoa(task2)))

	before := deliveryCounts(t, tx)
	require.Equal(t, "duplicate", scalar[string](t, tx, `select outcome from comms.record_sms_delivery('SM2', 'undelivered', '30005')`))
	require.Equal(t, "duplicate", scalar[string](t, tx, `select outcome from comms.record_sms_delivery('SM1', 'delivered')`))
	require.Equal(t, before, deliveryCounts(t, tx))
}

// An id no attempt has is recorded in queues.error (no task) and nothing else is written.
func TestDeliveryUnknownAttempt(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	sentEmail(t, tx, "re_known")
	before := deliveryCounts(t, tx)

	r := recordEmail(t, tx, "re_nobody", "email.bounced", ptr("x"), `{}`)
	require.Equal(t, deliveryRow{Outcome: "unknown_attempt"}, r)
	require.Equal(t, "unknown_attempt", scalar[string](t, tx, `select outcome from comms.record_sms_delivery('SMnobody', 'failed')`))

	after := deliveryCounts(t, tx)
	require.Equal(t, before[:5], after[:5], "no fact and no signal")
	require.Equal(t, before[5]+2, after[5], "two rows in queues.error")
	require.Equal(t, []string{
		"record_email_delivery: no email attempt has provider message id 're_nobody' (event email.bounced); nothing recorded",
		"record_sms_delivery: no SMS attempt has provider message id 'SMnobody' (event sms.failed); nothing recorded",
	}, scalar[[]string](t, tx, `select array_agg(error_message order by error_id) from queues.error where task_id is null`))
}

// Bad input raises 22023 naming what is wrong, and writes nothing.
func TestDeliveryBadInput(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ctx := context.Background()
	sentEmail(t, pool, "re_1")
	sentSMS(t, pool, "SM1")
	before := deliveryCounts(t, pool)

	for _, tc := range []struct{ sql, msg string }{
		{`select * from comms.record_email_delivery('', 'email.delivered')`, "the provider message id must not be empty"},
		{`select * from comms.record_email_delivery(null, 'email.delivered')`, "the provider message id must not be empty"},
		{`select * from comms.record_email_delivery(repeat('x', 257), 'email.delivered')`, "over the limit of 256"},
		{`select * from comms.record_email_delivery('re_1', 'email.opened')`, "event must be email.delivered, email.bounced or email.complained, got 'email.opened'"},
		{`select * from comms.record_email_delivery('re_1', null)`, "got NULL"},
		{`select * from comms.record_email_delivery('re_1', 'email.delivered', null, '[1]')`, "payload must be a JSON object, got array"},
		{`select * from comms.record_sms_delivery('SM1', 'sent')`, "status must be delivered, undelivered or failed, got 'sent'"},
		{`select * from comms.record_sms_delivery('SM1', 'delivered', null, null, '"x"')`, "payload must be a JSON object, got string"},
		{`select comms.record_webhook_refusal('', 'why')`, "provider must be 1 to 64 characters"},
		{`select comms.record_webhook_refusal('resend', ' ')`, "reason must not be empty"},
	} {
		_, err := pool.Exec(ctx, tc.sql)
		require.ErrorContains(t, err, tc.msg, tc.sql)
		require.ErrorContains(t, err, "SQLSTATE 22023", tc.sql)
	}
	require.Equal(t, before, deliveryCounts(t, pool), "bad input writes nothing")
}

// A refusal is one queues.error row with no task, its context kept and bounded.
func TestWebhookRefusalRecorded(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	mustExec(t, tx, `select comms.record_webhook_refusal('resend', 'signature does not match', '{"svix_id": "msg_1", "status": 401}')`)
	mustExec(t, tx, `select comms.record_webhook_refusal('twilio', 'too big', jsonb_build_object('junk', repeat('x', 20000)))`)
	got := scalar[[]string](t, tx, `select array_agg(error_message || '|' || context::text order by error_id) from queues.error where task_id is null`)
	require.Len(t, got, 2)
	require.Equal(t, `webhook resend refused: signature does not match|{"source": "webhook", "status": 401, "svix_id": "msg_1", "provider": "resend"}`, got[0])
	require.Regexp(t, `^webhook twilio refused: too big\|\{"source": "webhook", "provider": "twilio", "context_dropped": "2\d{4} bytes, over 8 KiB"\}$`, got[1])
}

// The worker role, which the webhook ingress runs as, may call the three recording functions
// and touch none of the tables they write.
func TestDeliveryAsWorkerRole(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ctx := context.Background()
	task, _ := sentEmail(t, pool, "re_w")
	sentSMS(t, pool, "SMw")

	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		mustExec(t, tx, `set local role worker_service_user`)
		require.Equal(t, "recorded", scalar[string](t, tx, `select outcome from comms.record_email_delivery('re_w', 'email.bounced', 'no such user')`))
		require.Equal(t, "recorded", scalar[string](t, tx, `select outcome from comms.record_sms_delivery('SMw', 'delivered')`))
		require.Equal(t, "unknown_attempt", scalar[string](t, tx, `select outcome from comms.record_email_delivery('re_x', 'email.delivered')`))
		mustExec(t, tx, `select comms.record_webhook_refusal('resend', 'test')`)
		return nil
	})
	require.NoError(t, err)
	require.True(t, scalar[bool](t, pool, `select queues.signal_payload('email.bounced', $1) is not null`, itoa(task)))

	for _, sql := range []string{
		`insert into comms.send_email_attempt_bounced (send_email_attempt_id, kind, provider_message_id) values (1, 'bounced', 'x')`,
		`select * from comms.send_sms_attempt_undelivered`,
		`select * from comms.send_email_attempt_delivered`,
		`insert into queues.error (error_message) values ('x')`,
		`select queues.signal('email.bounced', '1')`,
		`select internal.record_unknown_delivery('a', 'b', 'c', 'd')`,
	} {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `set local role worker_service_user`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, sql)
			return err
		})
		require.ErrorContains(t, err, "permission denied", sql)
	}
}
