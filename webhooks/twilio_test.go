package webhooks_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/webhooks"
)

func statusForm(sid, status string, extra ...string) url.Values {
	f := url.Values{
		"MessageSid":    {sid},
		"SmsSid":        {sid},
		"MessageStatus": {status},
		"SmsStatus":     {status},
		"AccountSid":    {"AC0123456789abcdef0123456789abcdef"},
		"From":          {"+15017122661"},
		"To":            {"+15551234567"},
		"ApiVersion":    {"2010-04-01"},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		f.Set(extra[i], extra[i+1])
	}
	return f
}

// Twilio's documented example (twilio.com/docs/usage/security, "Validating requests"): auth token
// 12345, this URL and these parameters sign to 0/KCTR6DLpKmkAf8muzZqo1nDgQ=; the test's own
// signer agrees.
func TestTwilioDocumentedExample(t *testing.T) {
	t.Parallel()
	const u = "https://mycompany.com/myapp.php?foo=1&bar=2"
	form := url.Values{
		"CallSid": {"CA1234567890ABCDE"},
		"Caller":  {"+12349013030"},
		"Digits":  {"1234"},
		"From":    {"+12349013030"},
		"To":      {"+18005551212"},
	}
	require.Equal(t, "0/KCTR6DLpKmkAf8muzZqo1nDgQ=", webhooks.TwilioSignature("12345", u, form))
	require.Equal(t, "0/KCTR6DLpKmkAf8muzZqo1nDgQ=", signTwilio("12345", u, form))
	form.Set("Digits", "1235")
	require.NotEqual(t, "0/KCTR6DLpKmkAf8muzZqo1nDgQ=", webhooks.TwilioSignature("12345", u, form))
}

// A verified delivered, undelivered and failed status callback each record a fact on the
// attempt MessageSid names and a signal sms.<status>; the same callback again changes nothing;
// other statuses are accepted and ignored.
func TestTwilioStatusCallbacks(t *testing.T) {
	t.Parallel()
	s := newServer(t, webhooks.Config{TwilioAuthToken: testToken})
	delivered := sentSMS(t, s.pool, "SM0001")
	undelivered := sentSMS(t, s.pool, "SM0002")
	failed := sentSMS(t, s.pool, "SM0003")

	before := written(t, s.pool)
	require.Equal(t, reply{200, "ignored sms.sent"}, s.twilio(t, statusForm("SM0001", "sent")))
	require.Equal(t, before, written(t, s.pool))
	require.Contains(t, s.logs.String(), "event=sms.sent")

	require.Equal(t, reply{200, "recorded"}, s.twilio(t, statusForm("SM0001", "delivered")))
	require.Equal(t, reply{200, "recorded"}, s.twilio(t, statusForm("SM0002", "undelivered", "ErrorCode", "30003", "ErrorMessage", "Unreachable destination handset")))
	require.Equal(t, reply{200, "recorded"}, s.twilio(t, statusForm("SM0003", "failed", "ErrorCode", "30008")))

	require.Equal(t, "SM0001", scalar[string](t, s.pool, `select queues.signal_payload('sms.delivered', $1) ->> 'provider_message_id'`, itoa(delivered)))
	require.Equal(t, "delivered", scalar[string](t, s.pool, `select payload ->> 'MessageStatus' from comms.send_sms_attempt_delivered`))
	require.JSONEq(t, `{"error_code": "30003", "reason": "Unreachable destination handset"}`,
		scalar[string](t, s.pool, `select (queues.signal_payload('sms.undelivered', $1) - 'send_sms_attempt_id' - 'provider_message_id')::text`, itoa(undelivered)))
	require.Equal(t, "30008", scalar[string](t, s.pool, `select queues.signal_payload('sms.failed', $1) ->> 'error_code'`, itoa(failed)))
	require.Equal(t, []string{"failed|30008|", "undelivered|30003|Unreachable destination handset"},
		scalar[[]string](t, s.pool, `select array_agg(status || '|' || coalesce(error_code, '') || '|' || coalesce(reason, '') order by status)
			from comms.send_sms_attempt_undelivered`))

	before = written(t, s.pool)
	require.Equal(t, reply{200, "duplicate"}, s.twilio(t, statusForm("SM0002", "undelivered", "ErrorCode", "30003", "ErrorMessage", "Unreachable destination handset")))
	require.Equal(t, reply{200, "duplicate"}, s.twilio(t, statusForm("SM0001", "delivered")))
	require.Equal(t, before, written(t, s.pool))
	require.Zero(t, scalar[int64](t, s.pool, `select count(*) from queues.error`))
}

// Every refusal answers its status, records one row in queues.error and writes nothing else.
func TestTwilioRefusals(t *testing.T) {
	t.Parallel()
	s := newServer(t, webhooks.Config{TwilioAuthToken: testToken, MaxBodyBytes: 1024})
	sentSMS(t, s.pool, "SM0001")
	self := s.srv.URL + "/webhooks/twilio"
	form := statusForm("SM0001", "undelivered", "ErrorCode", "30003")
	tampered := statusForm("SM0001", "delivered")
	big := statusForm("SM0001", "delivered", "Body", strings.Repeat("x", 2000))
	noSid := statusForm("", "delivered")

	for _, tc := range []struct {
		name        string
		contentType string
		body        string
		sig         string
		status      int
		reason      string
	}{
		{"unsigned", "", form.Encode(), "", 401, "unsigned: no X-Twilio-Signature header"},
		{"another token", "", form.Encode(), signTwilio("ffffffffffffffffffffffffffffffff", self, form), 401, "the X-Twilio-Signature does not match"},
		{"tampered form", "", tampered.Encode(), signTwilio(testToken, self, form), 401, "the X-Twilio-Signature does not match"},
		{"another URL", "", form.Encode(), signTwilio(testToken, "https://elsewhere.example/webhooks/twilio", form), 401, "set TASKORCH_TWILIO_WEBHOOK_URL"},
		{"oversized", "", big.Encode(), signTwilio(testToken, self, big), 413, "over the limit of 1024 bytes"},
		{"JSON, not a form", "application/json", `{"MessageSid": "SM0001"}`, "x", 400, "the body is not a form"},
		{"bad form", "", "a=%zz", "x", 400, "the body is not a valid form"},
		{"no MessageSid", "", noSid.Encode(), signTwilio(testToken, self, noSid), 400, "a status callback without MessageSid and MessageStatus"},
	} {
		before := written(t, s.pool)
		req, err := http.NewRequest(http.MethodPost, self, strings.NewReader(tc.body))
		require.NoError(t, err)
		ct := tc.contentType
		if ct == "" {
			ct = "application/x-www-form-urlencoded"
		}
		req.Header.Set("Content-Type", ct)
		if tc.sig != "" {
			req.Header.Set("X-Twilio-Signature", tc.sig)
		}
		got := do(t, req)
		require.Equal(t, tc.status, got.status, "%s: %s", tc.name, got.body)
		require.Contains(t, got.body, tc.reason, tc.name)
		after := written(t, s.pool)
		require.Equal(t, before[:5], after[:5], "%s: no fact, no signal", tc.name)
		require.Equal(t, before[5]+1, after[5], "%s: one row in queues.error", tc.name)
		require.Contains(t, lastError(t, s.pool), "webhook twilio refused: ", tc.name)
		require.Contains(t, lastError(t, s.pool), tc.reason, tc.name)
	}

	before := written(t, s.pool)
	require.Equal(t, reply{404, `no attempt has provider message id "SM9999"`}, s.twilio(t, statusForm("SM9999", "failed")))
	after := written(t, s.pool)
	require.Equal(t, before[:5], after[:5])
	require.Equal(t, before[5]+1, after[5])
	require.Contains(t, lastError(t, s.pool), "no SMS attempt has provider message id 'SM9999'")
}

// With TwilioURL set, the signature is checked against the public URL Twilio called (behind a
// proxy the handler cannot see it), with the request's query string; a signature over the
// handler's own address is refused.
func TestTwilioPublicURL(t *testing.T) {
	t.Parallel()
	const public = "https://hooks.example.com/webhooks/twilio"
	s := newServer(t, webhooks.Config{TwilioAuthToken: testToken, TwilioURL: public})
	sentSMS(t, s.pool, "SM0001")
	form := statusForm("SM0001", "delivered")

	require.Equal(t, http.StatusUnauthorized, s.twilio(t, form).status)
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+"/webhooks/twilio?tenant=7", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", signTwilio(testToken, public+"?tenant=7", form))
	require.Equal(t, reply{200, "recorded"}, do(t, req))
}

// A provider without its secret is not served: 404 naming the variable; malformed settings are
// refused by NewHandler.
func TestNotConfiguredAndBadConfig(t *testing.T) {
	t.Parallel()
	s := newServer(t, webhooks.Config{ResendSecret: testSecret})
	got := s.twilio(t, statusForm("SM1", "delivered"))
	require.Equal(t, reply{404, "twilio webhooks are not configured here (set TASKORCH_TWILIO_AUTH_TOKEN)"}, got)
	require.Equal(t, map[string]bool{"/webhooks/resend": true, "/webhooks/twilio": false}, s.h.Routes())
	require.Zero(t, scalar[int64](t, s.pool, `select count(*) from queues.error`))

	for _, tc := range []struct {
		cfg webhooks.Config
		msg string
	}{
		{webhooks.Config{ResendSecret: "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "whsec_ followed by base64"},
		{webhooks.Config{ResendSecret: "whsec_!!!"}, "whsec_ followed by base64"},
		{webhooks.Config{TwilioAuthToken: "abc def"}, "letters and digits"},
		{webhooks.Config{TwilioAuthToken: testToken, TwilioURL: "/webhooks/twilio"}, "not an absolute http(s) URL"},
	} {
		_, err := webhooks.NewHandler(s.pool, tc.cfg)
		require.ErrorContains(t, err, tc.msg)
	}
	_, err := webhooks.NewHandler(nil, webhooks.Config{})
	require.ErrorContains(t, err, "needs a *pgxpool.Pool")
}
