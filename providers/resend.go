package providers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/resend/resend-go/v2"

	"github.com/taskorch/taskorch"
)

// DefaultResendBaseURL is Resend's API.
const DefaultResendBaseURL = "https://api.resend.com"

// ResendConfig configures a Resend provider.
type ResendConfig struct {
	// APIKey is the Resend API key (re_...). Required.
	APIKey string
	// BaseURL is the API's address. Defaults to DefaultResendBaseURL.
	BaseURL string
	// From is the sender of requests without one.
	From string
	// Timeout bounds one call. Defaults to DefaultTimeout. Ignored with HTTPClient.
	Timeout time.Duration
	// HTTPClient makes the requests (its transport is wrapped). Defaults to a client with
	// Timeout.
	HTTPClient *http.Client
}

// Resend sends email through Resend's API with its official Go SDK. It passes the request's
// idempotency key (or the call's) as the Idempotency-Key header, so Resend sends a message once
// per key within 24 hours however often the call is repeated.
type Resend struct {
	client *resend.Client
	from   string
	red    redactor
}

// NewResend returns a Resend provider.
func NewResend(cfg ResendConfig) (*Resend, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("resend: the API key is empty (TASKORCH_RESEND_API_KEY)")
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultResendBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("resend: the base URL %q is not an http(s) URL (TASKORCH_RESEND_BASE_URL)", base)
	}
	// The SDK resolves "emails" against the base URL: keep its path as a directory.
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	hc := httpClient(cfg.HTTPClient, cfg.Timeout, func(next http.RoundTripper) http.RoundTripper {
		return &recordingTransport{next: next}
	})
	c := resend.NewCustomClient(hc, cfg.APIKey)
	c.BaseURL = u
	return &Resend{client: c, from: cfg.From, red: newRedactor(cfg.APIKey)}, nil
}

// resendError is the body of Resend's error answers.
type resendError struct {
	StatusCode int    `json:"statusCode"`
	Name       string `json:"name"`
	Message    string `json:"message"`
}

// Call sends the email of call.Request (an EmailRequest) and returns
// {"provider":"resend","id":"<Resend's email id>"}.
func (p *Resend) Call(ctx context.Context, call taskorch.ChannelCall) (json.RawMessage, error) {
	req, err := parseEmail("resend", call, p.from, true)
	if err != nil {
		return nil, err
	}
	params := &resend.SendEmailRequest{
		From:    req.From,
		To:      []string{req.To},
		Subject: req.Subject,
		Text:    req.Text,
		Html:    req.HTML,
		ReplyTo: req.ReplyTo,
	}
	x := &exchange{}
	res, err := p.client.Emails.SendWithOptions(withExchange(ctx, x), params,
		&resend.SendEmailOptions{IdempotencyKey: resendIdempotencyKey(req.IdempotencyKey)})
	switch {
	case x.status == 0 && err != nil:
		return nil, p.red.transportError(ctx, "resend", err)
	case x.status >= 200 && x.status < 300 && err != nil:
		return nil, p.red.unparseable("resend", x.status, err)
	case x.status >= 200 && x.status < 300 && (res == nil || res.Id == ""):
		return nil, p.red.unparseable("resend", x.status, fmt.Errorf("no email id in %q", snippet(x.body)))
	case x.status >= 300:
		return nil, p.statusError(x)
	}
	return json.Marshal(map[string]string{"provider": "resend", "id": res.Id})
}

// resendIdempotencyKey returns key, or a digest of it when it is longer than the 256
// characters Resend accepts: still the same for the same key.
func resendIdempotencyKey(key string) string {
	if len(key) <= 256 {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (p *Resend) statusError(x *exchange) error {
	var body resendError
	if x.status == http.StatusTooManyRequests {
		// rate_limit_exceeded, daily_quota_exceeded: Resend says when in Retry-After.
		_ = json.Unmarshal(x.body, &body)
		return p.red.rateLimited("resend", x.status, body.Name, body.Message, parseRetryAfter(x.retryAfter, time.Now()))
	}
	if err := json.Unmarshal(x.body, &body); err != nil || (body.Name == "" && body.Message == "") {
		return p.red.httpStatusError("resend", x.status, "", "unexpected answer: "+snippet(x.body))
	}
	if body.Name == "concurrent_idempotent_requests" {
		// The same key is in flight: the first request will send it; ask again later.
		return p.red.newError("resend", x.status, body.Name, body.Message, false).result()
	}
	return p.red.httpStatusError("resend", x.status, body.Name, body.Message)
}
