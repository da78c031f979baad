package providers_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/providers"
)

// A provider's "slow down" is a taskorch.RateLimitedError carrying the wait the provider asked
// for (Retry-After in seconds or as an HTTP date; none: 0, the worker's default backoff), not a
// failure; the providers.Error inside says what the provider answered.
func TestProvidersRateLimited(t *testing.T) {
	t.Parallel()
	serve := func(t *testing.T, status int, retryAfter, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	resendBody := `{"statusCode":429,"name":"rate_limit_exceeded","message":"Too many requests. You can only make 2 requests per second."}`
	twilioBody := `{"code":20429,"message":"Too Many Requests","more_info":"https://www.twilio.com/docs/errors/20429","status":429}`
	inTwoMinutes := time.Now().Add(2 * time.Minute).UTC().Format(http.TimeFormat)
	for _, tt := range []struct {
		name       string
		call       func(url string) error
		status     int
		retryAfter string
		body       string
		want       time.Duration // the RetryAfter expected (within a few seconds for a date)
		msg        string
	}{
		{"resend, seconds", resendCall(t), 429, "3", resendBody, 3 * time.Second, "resend: 429 rate_limit_exceeded: Too many requests."},
		{"resend, a date", resendCall(t), 429, inTwoMinutes, resendBody, 2 * time.Minute, "resend: 429 rate_limit_exceeded"},
		{"resend, no header", resendCall(t), 429, "", resendBody, 0, "resend: 429"},
		{"resend, a bad header", resendCall(t), 429, "soon", `not json`, 0, "resend: 429: too many requests"},
		{"resend, an hour at most", resendCall(t), 429, "86400", resendBody, time.Hour, "resend: 429"},
		{"twilio 20429", twilioCall(t), 429, "1", twilioBody, time.Second, "twilio: 429 20429: Too Many Requests"},
		{"twilio 20429 on another status", twilioCall(t), 503, "", `{"code":20429,"message":"Too Many Requests","status":503}`, 0, "twilio: 503 20429"},
		{"twilio, a 429 page", twilioCall(t), 429, "2", `<html>slow down</html>`, 2 * time.Second, "twilio: 429: too many requests: <html>slow down</html>"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.call(serve(t, tt.status, tt.retryAfter, tt.body))
			var rl *taskorch.RateLimitedError
			require.True(t, errors.As(err, &rl), "want RateLimited, got %T: %v", err, err)
			tolerance := 0.001
			if tt.retryAfter == inTwoMinutes {
				tolerance = 10 // a date is to the second, and the subtests wait for each other
			}
			require.InDelta(t, tt.want.Seconds(), rl.RetryAfter.Seconds(), tolerance)
			var pe *providers.Error
			require.True(t, errors.As(err, &pe))
			require.True(t, pe.RateLimited)
			require.False(t, pe.Permanent)
			var d *taskorch.DiscardError
			require.False(t, errors.As(err, &d), "not a discard")
			require.Contains(t, err.Error(), tt.msg)
		})
	}
}

func resendCall(t *testing.T) func(url string) error {
	return func(url string) error {
		_, err := newResend(t, url).Call(t.Context(), call(t, `{"to":"a@example.com","subject":"s","text":"t"}`))
		return err
	}
}

func twilioCall(t *testing.T) func(url string) error {
	return func(url string) error {
		_, err := newTwilio(t, url).Call(t.Context(), call(t, `{"to":"+15551234567","body":"hi"}`))
		return err
	}
}
