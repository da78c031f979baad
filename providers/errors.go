package providers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/taskorch/taskorch"
)

// Error is a failed provider call. Providers return it as is when retrying may help (a 5xx, a
// timeout, a network error), wrapped in taskorch.RateLimited when the provider asked to slow
// down (a 429, Twilio's 20429, an SMTP 421 or 451), and wrapped in taskorch.Discard when it
// cannot (a 4xx, a permanent SMTP reply, a malformed request); errors.As finds it in each case.
//
// Its message never holds a credential: API keys, auth tokens, passwords, secret keys and the
// signature of a signed URL are replaced by [REDACTED] before the Error is made.
type Error struct {
	// Provider names the provider: "resend", "smtp", "twilio", "outbox", "files_http", "s3".
	Provider string
	// StatusCode is the HTTP status or the SMTP reply code; 0 when there was no answer.
	StatusCode int
	// Code is the provider's own error code when it gave one ("validation_error", "21211",
	// "SignatureDoesNotMatch").
	Code string
	// Message says what went wrong.
	Message string
	// Permanent reports that retrying the same request cannot succeed.
	Permanent bool
	// RateLimited reports that the provider refused the call as one too many (HTTP 429,
	// Twilio's 20429, SMTP 421 or 451); RetryAfter is how long it asked to wait (0: it did not
	// say). The worker runs the task again then, without spending an attempt.
	RateLimited bool
	RetryAfter  time.Duration

	cause error // only context errors, which hold no secret
}

// Error formats the error as "provider: status code: message", leaving out what is unknown.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider)
	b.WriteString(":")
	if e.StatusCode != 0 {
		b.WriteString(" ")
		b.WriteString(strconv.Itoa(e.StatusCode))
	}
	if e.Code != "" {
		b.WriteString(" ")
		b.WriteString(e.Code)
	}
	if e.StatusCode != 0 || e.Code != "" {
		b.WriteString(":")
	}
	b.WriteString(" ")
	b.WriteString(e.Message)
	return b.String()
}

// Unwrap returns context.Canceled or context.DeadlineExceeded when the call was cut short.
func (e *Error) Unwrap() error { return e.cause }

// result wraps e in taskorch.RateLimited when the provider said "slow down", and in
// taskorch.Discard when it is permanent.
func (e *Error) result() error {
	switch {
	case e.RateLimited:
		return taskorch.RateLimited(e, e.RetryAfter)
	case e.Permanent:
		return taskorch.Discard(e)
	}
	return e
}

// maxRetryAfter caps the wait a provider may ask for.
const maxRetryAfter = time.Hour

// parseRetryAfter reads a Retry-After header: seconds, or an HTTP date. Empty, unreadable or
// past: 0 (the worker's default backoff); at most maxRetryAfter.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 || secs != secs {
			return 0
		}
		d = time.Duration(min(secs, maxRetryAfter.Seconds()) * float64(time.Second))
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}

// rateLimited reports a provider's "slow down" answer.
func (r redactor) rateLimited(provider string, status int, code, msg string, retryAfter time.Duration) error {
	if msg == "" {
		msg = "too many requests"
	}
	e := r.newError(provider, status, code, msg, false)
	e.RateLimited, e.RetryAfter = true, retryAfter
	return e.result()
}

// redactor removes credentials from error text: the configured secrets themselves, the values
// of signed-URL query parameters and the password of a URL.
type redactor struct{ secrets []string }

func newRedactor(secrets ...string) redactor {
	var r redactor
	for _, s := range secrets {
		if s != "" {
			r.secrets = append(r.secrets, s)
		}
	}
	return r
}

// with returns a redactor that also removes more.
func (r redactor) with(more ...string) redactor {
	out := redactor{secrets: append([]string(nil), r.secrets...)}
	for _, s := range more {
		if s != "" {
			out.secrets = append(out.secrets, s)
		}
	}
	return out
}

// signedParam matches the query parameters of signed URLs (AWS SigV2/SigV4, GCS V2/V4, Azure
// SAS) and common token parameters.
var signedParam = regexp.MustCompile(`(?i)(\b(?:x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|x-goog-credential|signature|awsaccesskeyid|googleaccessid|sig|access_token|token|key)=)[^&\s"'<>]*`)

// sensitiveParam reports whether a URL query parameter holds a credential or a signature.
func sensitiveParam(name string) bool {
	return signedParam.MatchString(name + "=")
}

// urlPassword matches the password of a URL's userinfo.
var urlPassword = regexp.MustCompile(`(://[^/:@\s]*:)[^@/\s]*@`)

func (r redactor) clean(s string) string {
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, "[REDACTED]")
		if esc := url.QueryEscape(secret); esc != secret {
			s = strings.ReplaceAll(s, esc, "[REDACTED]")
		}
	}
	s = signedParam.ReplaceAllString(s, "${1}[REDACTED]")
	return urlPassword.ReplaceAllString(s, "${1}[REDACTED]@")
}

// newError makes an Error with its message cleaned.
func (r redactor) newError(provider string, status int, code, msg string, permanent bool) *Error {
	return &Error{Provider: provider, StatusCode: status, Code: r.clean(code), Message: r.clean(msg), Permanent: permanent}
}

// transportError reports a call that got no answer (network, TLS, timeout): retriable.
func (r redactor) transportError(ctx context.Context, provider string, err error) error {
	e := r.newError(provider, 0, "", "request failed: "+err.Error(), false)
	if cerr := ctx.Err(); cerr != nil {
		e.cause = cerr
	} else if errors.Is(err, context.DeadlineExceeded) {
		e.cause = context.DeadlineExceeded
	}
	return e.result()
}

// httpStatusError classifies an HTTP error status: 408, 425 and 429 and every 5xx may pass on
// retry; other 4xx cannot.
func (r redactor) httpStatusError(provider string, status int, code, msg string) error {
	if msg == "" {
		msg = "the provider answered with an error and no message"
	}
	return r.newError(provider, status, code, msg, !retriableStatus(status)).result()
}

func retriableStatus(status int) bool {
	switch {
	case status == 408, status == 425, status == 429:
		return true
	case status >= 500:
		return true
	}
	return false
}

// unparseable reports a response that could not be parsed: retriable, since the provider may
// answer properly next time (with an idempotency key the retry is safe where the provider
// supports one).
func (r redactor) unparseable(provider string, status int, err error) error {
	where := ""
	if status != 0 {
		where = fmt.Sprintf(" (HTTP %d)", status)
	}
	return r.newError(provider, 0, "", fmt.Sprintf("could not parse the provider's response%s: %v", where, err), false).result()
}

// badRequest reports a malformed channel request: permanent.
func badRequest(provider, format string, args ...any) error {
	return (&Error{Provider: provider, Message: "bad request: " + fmt.Sprintf(format, args...), Permanent: true}).result()
}

// snippet shortens a response body for an error message.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
