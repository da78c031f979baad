package push

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// The signature is Standard Webhooks': the specification's test vector (secret, id, timestamp,
// body and signature as its reference libraries test them) signs the same.
func TestSignStandardWebhooksVector(t *testing.T) {
	t.Parallel()
	keys, err := ParseSecrets("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "S")
	require.NoError(t, err)
	got := Sign(keys, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", got)

	// Two keys: one entry each, the first first.
	two, err := ParseSecrets(" whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw , whsec_"+base64.StdEncoding.EncodeToString([]byte("another-key-of-24-bytes!")), "S")
	require.NoError(t, err)
	entries := strings.Fields(Sign(two, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`)))
	require.Len(t, entries, 2)
	require.Equal(t, got, entries[0])
	require.NotEqual(t, entries[0], entries[1])
}

// Bad secrets are refused with the setting's name and the secret's position, never its text.
func TestParseSecretsErrors(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]string{
		"":               "S is not set",
		" , ":            "S is not set",
		"s3cr3t-plain":   "S: secret 1 does not start with whsec_",
		"whsec_s3cr3t!!": "S: secret 1 is not whsec_ and standard base64",
		"whsec_czNjcjN0": "S: secret 1 is a key of 6 bytes; at least 16 are needed",
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw,x": "S: secret 2 does not start with whsec_",
	} {
		_, err := ParseSecrets(v, "S")
		require.Error(t, err, v)
		require.Contains(t, err.Error(), want, v)
		require.NotContains(t, err.Error(), "s3cr3t", v)
		require.NotContains(t, err.Error(), "czNjcjN0", v)
	}
}

// Targets: TYPE=URL, http or https; the redacted form drops credentials and query; a plain http
// target off the machine is insecure.
func TestParseTargets(t *testing.T) {
	t.Parallel()
	ts, err := ParseTargets([]string{" a.b = https://u:pw@h.example/p?token=x ", "", "c=http://127.0.0.1:8080/", "d=http://localhost/", "e=http://10.0.0.1/"}, "S")
	require.NoError(t, err)
	require.Len(t, ts, 4)
	require.Equal(t, "a.b", ts[0].Type)
	require.Equal(t, "https://h.example/p", ts[0].Redacted())
	require.Equal(t, "https://u:pw@h.example/p?token=x", ts[0].URL.String(), "the request goes to the URL as given")
	require.False(t, ts[0].Insecure())
	require.False(t, ts[1].Insecure())
	require.False(t, ts[2].Insecure())
	require.True(t, ts[3].Insecure())

	none, err := ParseTargets(nil, "S")
	require.NoError(t, err)
	require.Empty(t, none)
}

// Retry-After: seconds or an HTTP date, as a wait from now; 0 (the default backoff) when absent,
// malformed or past; at most a day.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		" 120 ":                         2 * time.Minute,
		"-5":                            0,
		"soon":                          0,
		"1.5":                           0,
		"99999999999999":                maxRetryAfter,
		"Fri, 27 Nov 2026 12:00:30 GMT": 30 * time.Second,
		"Fri, 27 Nov 2026 11:00:00 GMT": 0,
		"Sun, 27 Dec 2026 12:00:00 GMT": maxRetryAfter,
	} {
		require.Equal(t, want, retryAfter(v, now), "%q", v)
	}
}

// An error's excerpt of the answer masks the secrets in each form, the signatures sent and
// key=value secrets, is printable, and is bounded on a rune boundary.
func TestExcerpt(t *testing.T) {
	t.Parallel()
	keys, err := ParseSecrets("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "S")
	require.NoError(t, err)
	u, err := ParseTargets([]string{"a=https://user:pa55word@h/"}, "S")
	require.NoError(t, err)
	p := newPusher(Config{Targets: u, Keys: keys, Timeout: time.Second})
	sig := Sign(keys, "id", 1, []byte("{}"))
	body := "echo whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw and MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, " + sig + " " +
		strings.TrimPrefix(sig, "v1,") + " pa55word Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("user:pa55word")) +
		" api_key=abc123\x00\n" + strings.Repeat("é", 1000)
	ex := p.excerpt([]byte(body), strings.Fields(sig))
	for _, s := range []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", strings.TrimPrefix(sig, "v1,"), "pa55word", "abc123", "dXNlcjpwYTU1d29yZA", "\x00", "\n"} {
		require.NotContains(t, ex, s)
	}
	require.True(t, strings.HasPrefix(ex, "echo xxxxx and xxxxx, xxxxx xxxxx xxxxx Authorization: Basic xxxxx api_key=xxxxx"), ex)
	require.True(t, utf8.ValidString(ex))
	require.LessOrEqual(t, len(ex), excerptBytes+len("…"))
	require.True(t, strings.HasSuffix(ex, "…"))
}

// A redirect is not followed: the task fails without retry, and the other server never sees
// the signed request.
func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	defer other.Close()
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL, http.StatusTemporaryRedirect)
	}))
	defer first.Close()
	targets, err := ParseTargets([]string{"a=" + first.URL + "/hook"}, "S")
	require.NoError(t, err)
	keys, err := ParseSecrets("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "S")
	require.NoError(t, err)
	h := &handler{p: newPusher(Config{Targets: targets, Keys: keys, Timeout: time.Second}), target: targets[0]}
	lease := int64(7)
	err = h.Work(context.Background(), &taskorch.Task{ID: 1, Type: "a", Payload: []byte(`{}`), Attempt: 1, MaxAttempts: 3, LeaseID: &lease})
	var discard *taskorch.DiscardError
	require.True(t, errors.As(err, &discard), "%v", err)
	require.Contains(t, err.Error(), "HTTP 307 Temporary Redirect")
	require.Contains(t, err.Error(), "redirects are not followed")
	require.Zero(t, reached.Load())
}

// Register refuses a type the handlers have already, and registers nothing then.
func TestRegisterRefusesATypeWithAHandler(t *testing.T) {
	t.Parallel()
	hs := taskorch.NewHandlers()
	hs.HandleFunc("a", func(context.Context, *taskorch.Task) error { return nil })
	targets, err := ParseTargets([]string{"b=http://h/", "a=http://h/"}, "S")
	require.NoError(t, err)
	err = Register(hs, Config{Targets: targets, Keys: [][]byte{[]byte("0123456789abcdef")}, Timeout: time.Second})
	require.ErrorContains(t, err, `task type "a" has a handler built into the worker already`)
	require.ElementsMatch(t, []string{"a"}, hs.Types())
	require.ErrorContains(t, Register(hs, Config{Targets: targets[:1], Timeout: time.Second}), "no signing key")
	require.ErrorContains(t, Register(hs, Config{Targets: targets[:1], Keys: [][]byte{[]byte("0123456789abcdef")}}), "timeout must be positive")
}
