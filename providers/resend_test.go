package providers_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/providers"
)

const resendKey = "re_TestKey_5d1c9a8b7e"

// resendServer is a local server implementing Resend's POST /emails as documented
// (https://resend.com/docs/api-reference/emails/send-email and .../errors): it checks what the
// SDK sends and answers with status and body.
type resendServer struct {
	*httptest.Server
	t      *testing.T
	status int
	body   string

	mu   sync.Mutex
	reqs []resendRequest
}

type resendRequest struct {
	Path           string
	IdempotencyKey string
	Body           map[string]any
}

func newResendServer(t *testing.T, status int, body string) *resendServer {
	s := &resendServer{t: t, status: status, body: body}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.Close)
	return s
}

func (s *resendServer) handle(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var body map[string]any
	if r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer "+resendKey ||
		r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &body) != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"statusCode":401,"name":"missing_api_key","message":"Missing API key in the authorization header."}`)
		return
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, resendRequest{Path: r.URL.Path, IdempotencyKey: r.Header.Get("Idempotency-Key"), Body: body})
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(s.status)
	_, _ = io.WriteString(w, s.body)
}

func (s *resendServer) requests() []resendRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]resendRequest(nil), s.reqs...)
}

func newResend(t *testing.T, baseURL string) *providers.Resend {
	t.Helper()
	p, err := providers.NewResend(providers.ResendConfig{APIKey: resendKey, BaseURL: baseURL, From: "Taskorch <noreply@example.com>"})
	require.NoError(t, err)
	return p
}

func TestResendSends(t *testing.T) {
	t.Parallel()
	srv := newResendServer(t, http.StatusOK, `{"id":"49a3999c-0ce1-4ea6-ab68-afcd6dc2e794"}`)
	p := newResend(t, srv.URL)

	resp, err := p.Call(t.Context(), call(t, map[string]any{
		"to": "ada@example.com", "subject": "Welcome", "text": "Hello Ada", "html": "<p>Hello Ada</p>",
		"reply_to": "help@example.com", "idempotency_key": "send_email_attempt-7",
		"message_id": 9, "send_email_attempt_id": 7, // extra fields are ignored
	}))
	require.NoError(t, err)
	require.Equal(t, map[string]any{"provider": "resend", "id": "49a3999c-0ce1-4ea6-ab68-afcd6dc2e794"}, decode(t, resp))

	reqs := srv.requests()
	require.Len(t, reqs, 1)
	require.Equal(t, "/emails", reqs[0].Path)
	require.Equal(t, "send_email_attempt-7", reqs[0].IdempotencyKey)
	require.Equal(t, map[string]any{
		"from": "Taskorch <noreply@example.com>", "to": []any{"ada@example.com"}, "subject": "Welcome",
		"text": "Hello Ada", "html": "<p>Hello Ada</p>", "reply_to": "help@example.com",
	}, reqs[0].Body)
}

func TestResendUsesTheCallsKeyAndTheRequestsFrom(t *testing.T) {
	t.Parallel()
	srv := newResendServer(t, http.StatusOK, `{"id":"e1"}`)
	// A base URL with a path: the SDK's requests go under it.
	p := newResend(t, srv.URL+"/proxy/resend")
	_, err := p.Call(t.Context(), call(t, `{"to":"a@example.com","from":"b@example.com","subject":"s","html":"<b>x</b>"}`))
	require.NoError(t, err)
	reqs := srv.requests()
	require.Len(t, reqs, 1)
	require.Equal(t, "/proxy/resend/emails", reqs[0].Path)
	require.Equal(t, "taskorch-task-42", reqs[0].IdempotencyKey)
	require.Equal(t, "b@example.com", reqs[0].Body["from"])
	require.NotContains(t, reqs[0].Body, "text")

	// A key longer than Resend's 256 characters is sent as its digest, the same every time.
	long := strings.Repeat("k", 300)
	for range 2 {
		_, err = p.Call(t.Context(), call(t, map[string]any{"to": "a@example.com", "subject": "s", "text": "t", "idempotency_key": long}))
		require.NoError(t, err)
	}
	reqs = srv.requests()
	require.Len(t, reqs, 3)
	require.Len(t, reqs[1].IdempotencyKey, len("sha256:")+64)
	require.Equal(t, reqs[1].IdempotencyKey, reqs[2].IdempotencyKey)
}

func TestResendErrors(t *testing.T) {
	t.Parallel()
	email := `{"to":"a@example.com","subject":"s","text":"t"}`
	tests := []struct {
		name      string
		status    int
		body      string
		permanent bool
		want      string
	}{
		{"validation error", 422, `{"statusCode":422,"name":"validation_error","message":"Invalid ` + "`to`" + ` field. The email address needs to follow the ` + "`email@example.com`" + ` format."}`,
			true, "resend: 422 validation_error: Invalid `to` field."},
		{"invalid api key echoed", 403, `{"statusCode":403,"name":"invalid_api_key","message":"API key ` + resendKey + ` is invalid"}`,
			true, "resend: 403 invalid_api_key: API key [REDACTED] is invalid"},
		{"invalid idempotent request", 409, `{"statusCode":409,"name":"invalid_idempotent_request","message":"Same idempotency key used with a different request payload."}`,
			true, "resend: 409 invalid_idempotent_request: Same idempotency key"},
		{"concurrent idempotent requests", 409, `{"statusCode":409,"name":"concurrent_idempotent_requests","message":"Same idempotency key used while original request is still in progress."}`,
			false, "resend: 409 concurrent_idempotent_requests"},
		{"rate limit", 429, `{"statusCode":429,"name":"rate_limit_exceeded","message":"Too many requests. You can only make 2 requests per second."}`,
			false, "resend: 429 rate_limit_exceeded: Too many requests."},
		{"server error", 500, `{"statusCode":500,"name":"internal_server_error","message":"An unexpected error occurred."}`,
			false, "resend: 500 internal_server_error: An unexpected error occurred."},
		{"gateway error page", 502, `<html>Bad Gateway</html>`, false, "resend: 502: unexpected answer: <html>Bad Gateway</html>"},
		{"unparseable success", 200, `<html>maintenance</html>`, false, "resend: could not parse the provider's response (HTTP 200): invalid character '<'"},
		{"success without id", 200, `{}`, false, "resend: could not parse the provider's response (HTTP 200): no email id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newResendServer(t, tt.status, tt.body)
			_, err := newResend(t, srv.URL).Call(t.Context(), call(t, email))
			var pe *providers.Error
			if tt.permanent {
				pe = requirePermanent(t, err)
			} else {
				pe = requireRetriable(t, err)
			}
			require.Contains(t, err.Error(), tt.want)
			require.Equal(t, "resend", pe.Provider)
			requireNoSecret(t, err, resendKey)
		})
	}
}

func TestResendUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := newResend(t, url).Call(t.Context(), call(t, `{"to":"a@example.com","subject":"s","text":"t"}`))
	pe := requireRetriable(t, err)
	require.Contains(t, pe.Error(), "resend: request failed: ")
	require.Contains(t, pe.Error(), "connection refused")
	requireNoSecret(t, err, resendKey)
}

func TestResendBadRequests(t *testing.T) {
	t.Parallel()
	srv := newResendServer(t, http.StatusOK, `{"id":"x"}`)
	noFrom, err := providers.NewResend(providers.ResendConfig{APIKey: resendKey, BaseURL: srv.URL})
	require.NoError(t, err)
	tests := []struct {
		name string
		p    *providers.Resend
		req  string
		want string
	}{
		{"no to", newResend(t, srv.URL), `{"subject":"s","text":"t"}`, `resend: bad request: "to" is missing`},
		{"two recipients", newResend(t, srv.URL), `{"to":"a@example.com, b@example.com","subject":"s","text":"t"}`, `"to" is not one email address`},
		{"no body", newResend(t, srv.URL), `{"to":"a@example.com","subject":"s"}`, `the email has no body`},
		{"no subject", newResend(t, srv.URL), `{"to":"a@example.com","text":"t"}`, `"subject" is missing`},
		{"not JSON", newResend(t, srv.URL), `{"to":`, `resend: bad request: the request is not valid`},
		{"not an object", newResend(t, srv.URL), `["a@example.com"]`, `the request must be a JSON object`},
		{"null", newResend(t, srv.URL), `null`, `the request is empty`},
		{"no sender", noFrom, `{"to":"a@example.com","subject":"s","text":"t"}`, `no default sender is configured (TASKORCH_EMAIL_FROM)`},
	}
	// After the parallel subtests:
	t.Cleanup(func() { require.Empty(t, srv.requests(), "a malformed request must not reach the provider") })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.p.Call(t.Context(), call(t, tt.req))
			requirePermanent(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}
