package webhooks_test

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/webhooks"
)

func resendEvent(typ, emailID, extra string) string {
	return `{"type": "` + typ + `", "created_at": "2026-01-02T03:04:05.000Z", "data": {"email_id": "` + emailID +
		`", "from": "Acme <a@acme.test>", "to": ["a@example.com"], "subject": "s"` + extra + `}}`
}

// Svix's own documented example (docs.svix.com, "Verifying Webhooks Manually"): its secret,
// headers and body verify at the time it was signed; one byte changed does not. The body is not
// a Resend event, so it is accepted and ignored.
func TestResendSvixDocumentedExample(t *testing.T) {
	t.Parallel()
	s := newServer(t, webhooks.Config{ResendSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	s.h.SetNow(func() time.Time { return time.Unix(1614265330, 0).Add(time.Minute) })
	const id, ts, sig = "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

	require.Equal(t, reply{200, "ignored"}, s.postResend(t, []byte(`{"test": 2432232314}`), id, ts, sig))
	// Several signatures (a secret rotation): any may match.
	require.Equal(t, reply{200, "ignored"}, s.postResend(t, []byte(`{"test": 2432232314}`), id, ts, "v1,bm90IGl0 v2,abc "+sig))
	require.Equal(t, http.StatusUnauthorized, s.postResend(t, []byte(`{"test": 2432232315}`), id, ts, sig).status)
	require.Equal(t, http.StatusUnauthorized, s.postResend(t, []byte(`{"test": 2432232314}`), id, "1614265331", sig).status)
	require.Equal(t, http.StatusUnauthorized, s.postResend(t, []byte(`{"test": 2432232314}`), "msg_other", ts, sig).status)
}

// A verified email.delivered, email.bounced and email.complained each record a fact on the
// attempt Resend's email_id names and a signal keyed by the process; the same webhook again
// answers 200 and changes nothing.
func TestResendDeliveryEvents(t *testing.T) {
	t.Parallel()
	s := newServer(t, webhooks.Config{ResendSecret: testSecret})
	delivered := sentEmail(t, s.pool, "4ef9a417-02e9-4d39-ad75-9611e0fcc33c")
	bounced := sentEmail(t, s.pool, "re_bounced")

	require.Equal(t, reply{200, "recorded"}, s.resend(t, "msg_1", resendEvent("email.delivered", "4ef9a417-02e9-4d39-ad75-9611e0fcc33c", "")))
	require.Equal(t, "4ef9a417-02e9-4d39-ad75-9611e0fcc33c", scalar[string](t, s.pool,
		`select queues.signal_payload('email.delivered', $1) ->> 'provider_message_id'`, itoa(delivered)))
	require.Equal(t, "email.delivered", scalar[string](t, s.pool, `select payload ->> 'type' from comms.send_email_attempt_delivered`))

	bounce := resendEvent("email.bounced", "re_bounced",
		`, "bounce": {"message": "The recipient's email address does not exist.", "type": "Permanent", "subType": "General"}`)
	require.Equal(t, reply{200, "recorded"}, s.resend(t, "msg_2", bounce))
	require.Equal(t, reply{200, "recorded"}, s.resend(t, "msg_3", resendEvent("email.complained", "re_bounced", "")))
	require.Equal(t, []string{"bounced|Permanent/General: The recipient's email address does not exist.", "complained|"},
		scalar[[]string](t, s.pool, `select array_agg(kind || '|' || coalesce(reason, '') order by kind) from comms.send_email_attempt_bounced`))
	require.Equal(t, "Permanent/General: The recipient's email address does not exist.",
		scalar[string](t, s.pool, `select queues.signal_payload('email.bounced', $1) ->> 'reason'`, itoa(bounced)))
	require.True(t, scalar[bool](t, s.pool, `select queues.signal_payload('email.complained', $1) is not null`, itoa(bounced)))

	// Svix delivers again (same svix-id, a new timestamp and signature): nothing changes.
	before := written(t, s.pool)
	require.Equal(t, reply{200, "duplicate"}, s.resend(t, "msg_2", bounce))
	require.Equal(t, reply{200, "duplicate"}, s.resend(t, "msg_1", resendEvent("email.delivered", "4ef9a417-02e9-4d39-ad75-9611e0fcc33c", "")))
	require.Equal(t, before, written(t, s.pool))
	require.Zero(t, scalar[int64](t, s.pool, `select count(*) from queues.error`))
}

// Every refusal answers its status with the reason, records one row in queues.error saying why,
// and writes nothing else.
func TestResendRefusals(t *testing.T) {
	t.Parallel()
	s := newServer(t, webhooks.Config{ResendSecret: testSecret, MaxBodyBytes: 1024})
	sentEmail(t, s.pool, "re_1")
	event := []byte(resendEvent("email.bounced", "re_1", ""))
	now := time.Now().Unix()
	sig := func(ts int64, body []byte) string { return signSvix(t, testSecret, "msg_1", ts, body) }
	ts := strconv.FormatInt(now, 10)
	big := []byte(resendEvent("email.bounced", "re_1", `, "pad": "`+strings.Repeat("x", 2000)+`"`))
	notJSON := []byte("type=email.bounced")

	for _, tc := range []struct {
		name, id, ts, sig string
		body              []byte
		status            int
		reason            string
	}{
		{"unsigned", "", "", "", event, 401, "unsigned: no svix-id, svix-timestamp, svix-signature header"},
		{"no signature", "msg_1", ts, "", event, 401, "unsigned: no svix-signature header"},
		{"another secret", "msg_1", ts, signSvix(t, otherSecret, "msg_1", now, event), event, 401, "the svix-signature does not match the body"},
		{"tampered body", "msg_1", ts, sig(now, event), []byte(resendEvent("email.delivered", "re_1", "")), 401, "the svix-signature does not match"},
		{"not v1", "msg_1", ts, strings.Replace(sig(now, event), "v1,", "v2,", 1), event, 401, "the svix-signature does not match"},
		{"replayed", "msg_1", strconv.FormatInt(now-6*60, 10), sig(now-6*60, event), event, 401, "old, outside the 5m0s window: replayed or late"},
		{"from the future", "msg_1", strconv.FormatInt(now+6*60, 10), sig(now+6*60, event), event, 401, "ahead, outside the 5m0s window"},
		{"oversized", "msg_1", ts, sig(now, big), big, 413, "over the limit of 1024 bytes"},
		{"not JSON", "msg_1", ts, sig(now, notJSON), notJSON, 400, "the body is not a JSON object"},
		{"JSON array", "msg_1", ts, sig(now, []byte(`[1]`)), []byte(`[1]`), 400, "the body is not a JSON object"},
		{"no email_id", "msg_1", ts, sig(now, []byte(`{"type": "email.bounced", "data": {}}`)), []byte(`{"type": "email.bounced", "data": {}}`), 400,
			"a email.bounced event without data.email_id"},
		{"NUL in the body", "msg_1", ts, sig(now, []byte(resendEvent("email.bounced", "re_1", `, "x": "\u0000"`))),
			[]byte(resendEvent("email.bounced", "re_1", `, "x": "\u0000"`)), 400, "the database refused the event"},
	} {
		before := written(t, s.pool)
		got := s.postResend(t, tc.body, tc.id, tc.ts, tc.sig)
		require.Equal(t, tc.status, got.status, "%s: %s", tc.name, got.body)
		require.Contains(t, got.body, tc.reason, tc.name)
		after := written(t, s.pool)
		require.Equal(t, before[:5], after[:5], "%s: no fact, no signal", tc.name)
		require.Equal(t, before[5]+1, after[5], "%s: one row in queues.error", tc.name)
		require.Regexp(t, `^webhook resend refused: .*`+regexp.QuoteMeta(tc.reason), lastError(t, s.pool), tc.name)
	}
	require.Equal(t, `{"path": "/webhooks/resend", "status": 401, "svix_id": "msg_1", "provider": "resend"}`,
		scalar[string](t, s.pool, `select (context - 'remote_addr' - 'source')::text from queues.error where error_message like '%replayed%'`))

	// An email_id no attempt has: 404 (Resend retries: the success handler may not have committed
	// yet), recorded by the SQL function, nothing else.
	before := written(t, s.pool)
	got := s.resend(t, "msg_9", resendEvent("email.delivered", "re_unknown", ""))
	require.Equal(t, reply{404, `no attempt has provider message id "re_unknown"`}, got)
	after := written(t, s.pool)
	require.Equal(t, before[:5], after[:5])
	require.Equal(t, before[5]+1, after[5])
	require.Contains(t, lastError(t, s.pool), "no email attempt has provider message id 're_unknown'")

	// Not POST: 405, nothing recorded.
	req, err := http.NewRequest(http.MethodGet, s.srv.URL+"/webhooks/resend", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusMethodNotAllowed, do(t, req).status)
	require.Equal(t, after, written(t, s.pool))
}

// An event taskorch does not record (an email opened) is accepted, logged and ignored.
func TestResendUnknownEventIgnored(t *testing.T) {
	t.Parallel()
	s := newServer(t, webhooks.Config{ResendSecret: testSecret})
	sentEmail(t, s.pool, "re_1")
	before := written(t, s.pool)
	require.Equal(t, reply{200, "ignored email.opened"}, s.resend(t, "msg_1", resendEvent("email.opened", "re_1", "")))
	require.Equal(t, reply{200, "ignored email.delivery_delayed"}, s.resend(t, "msg_2", resendEvent("email.delivery_delayed", "re_1", "")))
	require.Equal(t, before, written(t, s.pool))
	require.Contains(t, s.logs.String(), "webhook ignored: not a delivery outcome taskorch records")
	require.Contains(t, s.logs.String(), "event=email.opened")
}
