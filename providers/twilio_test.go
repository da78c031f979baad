package providers_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/providers"
)

const (
	twilioSID   = "AC0123456789abcdef0123456789abcdef"
	twilioToken = "TwilioToken9f8e7d6c5b4a"
)

// twilioServer is a local server implementing Twilio's Create Message endpoint as documented
// (https://www.twilio.com/docs/messaging/api/message-resource#create-a-message-resource):
// POST /2010-04-01/Accounts/{AccountSid}/Messages.json, HTTP basic auth with the account SID
// and auth token, form-encoded To, From or MessagingServiceSid, Body; 201 with the Message
// resource, or an error {"code","message","more_info","status"}.
type twilioServer struct {
	*httptest.Server
	status int
	body   string // %s is replaced by the message SID

	mu    sync.Mutex
	forms []url.Values
	paths []string
}

func newTwilioServer(t *testing.T, status int, body string) *twilioServer {
	s := &twilioServer{status: status, body: body}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.Close)
	return s
}

func (s *twilioServer) handle(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	user, pass, ok := r.BasicAuth()
	if !ok || user != twilioSID || pass != twilioToken {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"code":20003,"message":"Authenticate","more_info":"https://www.twilio.com/docs/errors/20003","status":401}`)
		return
	}
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if err := r.ParseForm(); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.forms = append(s.forms, r.PostForm)
	s.paths = append(s.paths, r.URL.Path)
	s.mu.Unlock()
	w.WriteHeader(s.status)
	_, _ = io.WriteString(w, s.body)
}

func (s *twilioServer) requests() ([]string, []url.Values) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.paths...), append([]url.Values(nil), s.forms...)
}

// twilioMessage is a documented 201 answer.
func twilioMessage(from, to, body string) string {
	return fmt.Sprintf(`{"account_sid":%[1]q,"api_version":"2010-04-01","body":%[4]q,
"date_created":"Thu, 24 Aug 2023 05:01:45 +0000","date_sent":null,"date_updated":"Thu, 24 Aug 2023 05:01:45 +0000",
"direction":"outbound-api","error_code":null,"error_message":null,"from":%[2]q,"messaging_service_sid":null,
"num_media":"0","num_segments":"1","price":null,"price_unit":"USD","sid":"SM0123456789abcdef0123456789abcdef",
"status":"queued","subresource_uris":{"media":"/2010-04-01/Accounts/%[1]s/Messages/SM0123456789abcdef0123456789abcdef/Media.json"},
"to":%[3]q,"uri":"/2010-04-01/Accounts/%[1]s/Messages/SM0123456789abcdef0123456789abcdef.json"}`, twilioSID, from, to, body)
}

func newTwilio(t *testing.T, baseURL string) *providers.Twilio {
	t.Helper()
	p, err := providers.NewTwilio(providers.TwilioConfig{AccountSID: twilioSID, AuthToken: twilioToken, From: "+15550001111", BaseURL: baseURL})
	require.NoError(t, err)
	return p
}

func TestTwilioSends(t *testing.T) {
	t.Parallel()
	srv := newTwilioServer(t, http.StatusCreated, twilioMessage("+15550001111", "+15551234567", "Your code is 1234"))
	resp, err := newTwilio(t, srv.URL).Call(t.Context(), call(t, map[string]any{
		"to": "+15551234567", "body": "Your code is 1234", "message_id": 3, "idempotency_key": "ignored by twilio",
	}))
	require.NoError(t, err)
	require.Equal(t, map[string]any{"provider": "twilio", "sid": "SM0123456789abcdef0123456789abcdef", "status": "queued"}, decode(t, resp))
	paths, forms := srv.requests()
	require.Equal(t, []string{"/2010-04-01/Accounts/" + twilioSID + "/Messages.json"}, paths)
	require.Equal(t, url.Values{"To": {"+15551234567"}, "From": {"+15550001111"}, "Body": {"Your code is 1234"}}, forms[0])
}

func TestTwilioMessagingServiceAndBasePath(t *testing.T) {
	t.Parallel()
	srv := newTwilioServer(t, http.StatusCreated, twilioMessage("", "+15551234567", "hi"))
	_, err := newTwilio(t, srv.URL+"/twilio").Call(t.Context(), call(t, `{"to":"+15551234567","body":"hi","from":"MG0123456789abcdef0123456789abcdef"}`))
	require.NoError(t, err)
	paths, forms := srv.requests()
	require.Equal(t, []string{"/twilio/2010-04-01/Accounts/" + twilioSID + "/Messages.json"}, paths)
	require.Equal(t, url.Values{"To": {"+15551234567"}, "MessagingServiceSid": {"MG0123456789abcdef0123456789abcdef"}, "Body": {"hi"}}, forms[0])
}

func TestTwilioErrors(t *testing.T) {
	t.Parallel()
	sms := `{"to":"+15551234567","body":"hi"}`
	tests := []struct {
		name      string
		status    int
		body      string
		permanent bool
		want      string
	}{
		{"invalid to", 400, `{"code":21211,"message":"The 'To' number +1555 is not a valid phone number.","more_info":"https://www.twilio.com/docs/errors/21211","status":400}`,
			true, "twilio: 400 21211: The 'To' number +1555 is not a valid phone number. (https://www.twilio.com/docs/errors/21211)"},
		{"token echoed", 401, `{"code":20003,"message":"Authentication Error - invalid token ` + twilioToken + `","more_info":"https://www.twilio.com/docs/errors/20003","status":401}`,
			true, "twilio: 401 20003: Authentication Error - invalid token [REDACTED]"},
		{"too many requests", 429, `{"code":20429,"message":"Too Many Requests","more_info":"https://www.twilio.com/docs/errors/20429","status":429}`,
			false, "twilio: 429 20429: Too Many Requests"},
		{"server error", 500, `{"code":20500,"message":"An internal server error has occurred","more_info":"https://www.twilio.com/docs/errors/20500","status":500}`,
			false, "twilio: 500 20500: An internal server error has occurred"},
		{"error page", 503, `<html>Service Unavailable</html>`, false, "twilio: 503: unexpected answer: <html>Service Unavailable</html>"},
		{"unparseable success", 201, `{"sid": `, false, "twilio: could not parse the provider's response (HTTP 201)"},
		{"success without sid", 201, `{"status":"queued"}`, false, "twilio: could not parse the provider's response (HTTP 201): no message sid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newTwilioServer(t, tt.status, tt.body)
			_, err := newTwilio(t, srv.URL).Call(t.Context(), call(t, sms))
			if tt.permanent {
				requirePermanent(t, err)
			} else {
				requireRetriable(t, err)
			}
			require.Contains(t, err.Error(), tt.want)
			requireNoSecret(t, err, twilioToken)
		})
	}
}

func TestTwilioWrongCredentials(t *testing.T) {
	t.Parallel()
	srv := newTwilioServer(t, http.StatusCreated, twilioMessage("+15550001111", "+15551234567", "hi"))
	p, err := providers.NewTwilio(providers.TwilioConfig{AccountSID: twilioSID, AuthToken: "WrongToken123", From: "+15550001111", BaseURL: srv.URL})
	require.NoError(t, err)
	_, err = p.Call(t.Context(), call(t, `{"to":"+15551234567","body":"hi"}`))
	pe := requirePermanent(t, err)
	require.Equal(t, 401, pe.StatusCode)
	require.Equal(t, "20003", pe.Code)
	requireNoSecret(t, err, "WrongToken123", twilioToken)
}

// The SDK makes requests without a context; the provider's call still ends with its ctx.
func TestTwilioHonoursTheContext(t *testing.T) {
	t.Parallel()
	arrived, done := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		close(arrived)
		select { // never answers: the client must give up
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // runs first
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-arrived
		cancel()
	}()
	start := time.Now()
	_, err := newTwilio(t, srv.URL).Call(ctx, call(t, `{"to":"+15551234567","body":"hi"}`))
	pe := requireRetriable(t, err)
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, time.Since(start), 10*time.Second)
	require.True(t, strings.HasPrefix(pe.Error(), "twilio: request failed: "), pe.Error())
}

func TestTwilioBadRequests(t *testing.T) {
	t.Parallel()
	srv := newTwilioServer(t, http.StatusCreated, `{}`)
	noFrom, err := providers.NewTwilio(providers.TwilioConfig{AccountSID: twilioSID, AuthToken: twilioToken, BaseURL: srv.URL})
	require.NoError(t, err)
	for _, tt := range []struct {
		name string
		p    *providers.Twilio
		req  string
		want string
	}{
		{"no to", newTwilio(t, srv.URL), `{"body":"hi"}`, `twilio: bad request: "to" is missing`},
		{"no body", newTwilio(t, srv.URL), `{"to":"+15551234567"}`, `twilio: bad request: "body" is missing`},
		{"bad JSON", newTwilio(t, srv.URL), `{"to":1}`, `twilio: bad request: the request is not valid`},
		{"no sender", noFrom, `{"to":"+15551234567","body":"hi"}`, `no default sender is configured (TASKORCH_TWILIO_FROM)`},
	} {
		_, err := tt.p.Call(t.Context(), call(t, tt.req))
		requirePermanent(t, err)
		require.Contains(t, err.Error(), tt.want, tt.name)
	}
	paths, _ := srv.requests()
	require.Empty(t, paths)
}

func TestTwilioConfigErrors(t *testing.T) {
	t.Parallel()
	_, err := providers.NewTwilio(providers.TwilioConfig{AccountSID: twilioSID})
	require.ErrorContains(t, err, "TASKORCH_TWILIO_AUTH_TOKEN")
	_, err = providers.NewTwilio(providers.TwilioConfig{AccountSID: twilioSID, AuthToken: "a-b"})
	require.ErrorContains(t, err, "letters and digits")
	require.NotContains(t, err.Error(), "a-b")
	_, err = providers.NewTwilio(providers.TwilioConfig{AccountSID: twilioSID, AuthToken: twilioToken, BaseURL: "ftp://x"})
	require.ErrorContains(t, err, "TASKORCH_TWILIO_BASE_URL")
}
