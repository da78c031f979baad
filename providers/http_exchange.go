package providers

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"path"
	"time"
)

// DefaultTimeout bounds one provider call when no timeout is configured.
const DefaultTimeout = 30 * time.Second

// maxResponseBytes caps how much of a provider's answer is read.
const maxResponseBytes = 1 << 20

// exchange is what an SDK's HTTP request got back: the status and the body, which the SDKs
// turn into errors that lose the status (Resend) or keep only what they could decode
// (Twilio). The provider classifies the failure from it.
type exchange struct {
	status     int
	body       []byte
	retryAfter string // the Retry-After header, if any
}

type exchangeKey struct{}

// withExchange returns a context under which recordingTransport records the answer in x.
func withExchange(ctx context.Context, x *exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, x)
}

// recordingTransport records each answer in the request's exchange (from its context, or the
// fixed one) after buffering the body, so the SDK still reads it. With base set, every
// request goes to base's scheme and host, under base's path: that is how an SDK with a fixed
// host (Twilio's) is pointed at another server. With ctx set, requests run under it (for SDKs
// that make requests without a context).
type recordingTransport struct {
	next  http.RoundTripper
	fixed *exchange
	ctx   context.Context // set on a transport made for one call
	base  *url.URL
}

func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if t.ctx != nil {
		ctx = t.ctx
	}
	if t.ctx != nil || t.base != nil {
		req = req.Clone(ctx)
		if t.base != nil {
			u := *req.URL
			u.Scheme, u.Host = t.base.Scheme, t.base.Host
			u.Path = path.Join("/", t.base.Path, req.URL.Path)
			u.RawPath = ""
			req.URL, req.Host = &u, ""
		}
	}
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	x := t.fixed
	if x == nil {
		x, _ = req.Context().Value(exchangeKey{}).(*exchange)
	}
	if x != nil {
		x.status, x.body, x.retryAfter = resp.StatusCode, body, resp.Header.Get("Retry-After")
	}
	if rerr != nil {
		return nil, rerr
	}
	return resp, nil
}

// httpClient returns c (or a client with timeout when c is nil) with its transport wrapped by
// wrap.
func httpClient(c *http.Client, timeout time.Duration, wrap func(http.RoundTripper) http.RoundTripper) *http.Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	var out http.Client
	if c != nil {
		out = *c
	} else {
		out.Timeout = timeout
	}
	if wrap != nil {
		out.Transport = wrap(out.Transport)
	}
	return &out
}
