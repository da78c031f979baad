// Package push is the machinery of push workers (docs/worker.md, "Push workers: HTTP endpoints
// in any language"): a Go handler, registered for chosen task types, that delivers each task to
// an HTTP endpoint as a signed POST and turns the answer into the task's outcome. Limits,
// cancellation, lease renewal, timeouts and metrics are the worker's, as for any Go handler: the
// request runs under the handler's context, which the worker cancels.
package push

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/redact"
	"github.com/taskorch/taskorch/internal/worker"
)

// The request's headers besides Content-Type and User-Agent (docs/worker.md, "Push workers").
const (
	// HeaderID, HeaderTimestamp and HeaderSignature are the signature's headers, named and
	// computed as Standard Webhooks (and Svix, whose signatures webhooks/svix.go checks) name and
	// compute them: base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)), as "v1,<base64>",
	// one entry per signing key, space-separated.
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
	// HeaderIdempotencyKey is the attempt's lease id: a new one for every attempt.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderDeadline is when the worker gives up on the request (RFC 3339, UTC, milliseconds):
	// the attempt's timeout from its claim.
	HeaderDeadline = "Taskorch-Deadline"
)

// SecretPrefix starts every signing secret: the key is the base64 after it (Standard Webhooks'
// format, which Svix and Resend use too).
const SecretPrefix = "whsec_"

// minKeyBytes is the shortest signing key accepted.
const minKeyBytes = 16

// maxResponseBytes bounds the body of a 2xx answer read: the database's limit of a result.
const maxResponseBytes = 8 << 20

// maxErrorBodyBytes bounds the body of another answer read, and excerptBytes the part of it an
// error records.
const (
	maxErrorBodyBytes = 64 << 10
	excerptBytes      = 512
)

// maxRetryAfter bounds the snooze a 429's Retry-After asks for.
const maxRetryAfter = 24 * time.Hour

// Target is one task type's endpoint.
type Target struct {
	Type string
	URL  *url.URL
}

// Redacted is the target's URL as errors and logs show it: scheme, host and path, without
// credentials or query.
func (t Target) Redacted() string { return redactURL(t.URL) }

func redactURL(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// ParseTargets reads TYPE=URL entries (setting names where they came from, for the errors): each
// type a valid task type that can have a Go handler, given once; each URL absolute http or https
// with a host and no fragment.
func ParseTargets(specs []string, setting string) ([]Target, error) {
	var out []Target
	seen := map[string]bool{}
	for _, spec := range specs {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		typ, raw, ok := strings.Cut(spec, "=")
		typ, raw = strings.TrimSpace(typ), strings.TrimSpace(raw)
		if !ok || typ == "" || raw == "" {
			return nil, fmt.Errorf("%s: %q is not TYPE=URL (e.g. reports.render=https://render.internal/taskorch)", setting, redact.String(spec))
		}
		if err := taskorch.ValidateTaskType(typ); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", setting, typ, err)
		}
		if typ == taskorch.TypeDBFunction || typ == taskorch.TypeEmail || typ == taskorch.TypeSMS || typ == taskorch.TypeFileDelete {
			return nil, fmt.Errorf("%s: task type %q is built in (run by the worker itself); it cannot be pushed", setting, typ)
		}
		if seen[typ] {
			return nil, fmt.Errorf("%s: task type %q is given twice; give each type one URL", setting, typ)
		}
		seen[typ] = true
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: the URL of %q is not a URL: %v", setting, typ, redact.String(err.Error()))
		}
		switch {
		case u.Scheme != "http" && u.Scheme != "https":
			return nil, fmt.Errorf("%s: the URL of %q must start with https:// or http://, got %q", setting, typ, redactURL(u))
		case u.Host == "" || u.Hostname() == "":
			return nil, fmt.Errorf("%s: the URL of %q has no host", setting, typ)
		case u.Fragment != "" || strings.Contains(raw, "#"):
			return nil, fmt.Errorf("%s: the URL of %q must not have a fragment (#...)", setting, typ)
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return nil, fmt.Errorf("%s: the URL of %q has a bad port %q", setting, typ, p)
			}
		}
		out = append(out, Target{Type: typ, URL: u})
	}
	return out, nil
}

// Insecure reports whether the target sends tasks in clear text off the machine: plain http to a
// host that is not a loopback address or localhost.
func (t Target) Insecure() bool {
	if t.URL.Scheme != "http" {
		return false
	}
	h := t.URL.Hostname()
	if h == "localhost" {
		return false
	}
	ip := net.ParseIP(h)
	return ip == nil || !ip.IsLoopback()
}

// ParseSecrets reads the signing secrets: comma-separated, each "whsec_" and the base64 of a key
// of at least 16 bytes. The first signs as the others do: every request carries one signature per
// secret, so that an endpoint holding any of them accepts it (rotation: docs/worker.md). The
// errors never repeat a secret.
func ParseSecrets(v, setting string) ([][]byte, error) {
	var keys [][]byte
	for i, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		b64, ok := strings.CutPrefix(s, SecretPrefix)
		if !ok {
			return nil, fmt.Errorf("%s: secret %d does not start with %s (make one with: echo %s$(openssl rand -base64 32))", setting, i+1, SecretPrefix, SecretPrefix)
		}
		key, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("%s: secret %d is not %s and standard base64", setting, i+1, SecretPrefix)
		}
		if len(key) < minKeyBytes {
			return nil, fmt.Errorf("%s: secret %d is a key of %d bytes; at least %d are needed (echo %s$(openssl rand -base64 32))", setting, i+1, len(key), minKeyBytes, SecretPrefix)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s is not set: push targets need a signing secret (echo %s$(openssl rand -base64 32)), which the endpoint checks", setting, SecretPrefix)
	}
	return keys, nil
}

// Sign returns the webhook-signature header's value for a request: "v1,<base64>" per key, in the
// keys' order, space-separated.
func Sign(keys [][]byte, id string, timestamp int64, body []byte) string {
	ts := strconv.FormatInt(timestamp, 10)
	var b strings.Builder
	for i, k := range keys {
		mac := hmac.New(sha256.New, k)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write([]byte(ts))
		mac.Write([]byte{'.'})
		mac.Write(body)
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.WriteString(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return b.String()
}

// Config configures the push handlers.
type Config struct {
	// Targets are the task types pushed and their endpoints.
	Targets []Target
	// Keys sign every request (ParseSecrets); at least one.
	Keys [][]byte
	// Timeout bounds one attempt's request (HandlerOpts.Timeout of the pushed types); it must be
	// positive.
	Timeout time.Duration
	// ParentResults reads a task's parents' results (Client.ParentResults), sent with a task
	// that has parents; nil sends the parents' ids alone.
	ParentResults func(ctx context.Context, id int64) ([]taskorch.ParentResult, error)
	// MaxConnsPerHost bounds the connections kept open to one endpoint (the worker's
	// concurrency is a good value); 0 means 100.
	MaxConnsPerHost int
	// UserAgent is sent as User-Agent; defaults to "taskorch".
	UserAgent string
}

// Request is the JSON body of a push: the task and its attempt.
type Request struct {
	TaskID      int64           `json:"task_id"`
	TaskType    string          `json:"task_type"`
	Payload     json.RawMessage `json:"payload"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	LeaseID     int64           `json:"lease_id"`
	Deadline    string          `json:"deadline,omitempty"`
	WorkflowID  *int64          `json:"workflow_id,omitempty"`
	// Parents are the tasks it was enqueued after, with their status and result; absent when
	// none.
	Parents []taskorch.ParentResult `json:"parents,omitempty"`
}

// Register adds a push handler to hs for each target, with HandlerOpts{Timeout: cfg.Timeout}.
// It refuses (without registering anything) a type hs has a handler for already, and a config
// without keys or timeout.
func Register(hs *taskorch.Handlers, cfg Config) error {
	if len(cfg.Keys) == 0 {
		return errors.New("push: no signing key")
	}
	if cfg.Timeout <= 0 {
		return fmt.Errorf("push: the timeout must be positive, got %s", cfg.Timeout)
	}
	have := hs.Types()
	for _, t := range cfg.Targets {
		if slices.Contains(have, t.Type) {
			return fmt.Errorf("task type %q has a handler built into the worker already; it cannot be pushed", t.Type)
		}
	}
	p := newPusher(cfg)
	for _, t := range cfg.Targets {
		hs.Handle(t.Type, &handler{p: p, target: t}, &taskorch.HandlerOpts{Timeout: cfg.Timeout})
	}
	return nil
}

// pusher holds what the push handlers share: the HTTP client and the keys.
type pusher struct {
	cfg     Config
	client  *http.Client
	secrets []string // what an excerpt must never show: the secrets, in each form
}

func newPusher(cfg Config) *pusher {
	if cfg.UserAgent == "" {
		cfg.UserAgent = "taskorch"
	}
	if cfg.MaxConnsPerHost <= 0 {
		cfg.MaxConnsPerHost = 100
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = max(tr.MaxIdleConns, cfg.MaxConnsPerHost*len(cfg.Targets))
	tr.MaxIdleConnsPerHost = cfg.MaxConnsPerHost
	p := &pusher{cfg: cfg, client: &http.Client{
		Transport: tr,
		// A redirect is not followed: the signed request goes where it was configured to, or
		// nowhere (the 3xx fails the task; set the final URL).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	for _, k := range cfg.Keys {
		b64 := base64.StdEncoding.EncodeToString(k)
		p.secrets = append(p.secrets, SecretPrefix+b64, b64, string(k))
	}
	for _, t := range cfg.Targets {
		if t.URL.User != nil {
			if pw, ok := t.URL.User.Password(); ok && pw != "" {
				p.secrets = append(p.secrets, pw,
					base64.StdEncoding.EncodeToString([]byte(t.URL.User.Username()+":"+pw)))
			}
		}
	}
	return p
}

// handler pushes the tasks of one type.
type handler struct {
	p      *pusher
	target Target
}

// Work delivers t and returns its outcome (docs/worker.md, "Push workers"): nil for a 2xx (its
// body the result), RateLimited for a 429, Discard for another 3xx or 4xx, an error (retried)
// for a 5xx, a timeout or a failed connection.
func (h *handler) Work(ctx context.Context, t *taskorch.Task) error {
	body, deadline, err := h.p.body(ctx, t)
	if err != nil {
		return err
	}
	var lease int64
	if t.LeaseID != nil {
		lease = *t.LeaseID
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.target.URL.String(), bytes.NewReader(body))
	if err != nil {
		return taskorch.Discard(fmt.Errorf("push to %s: %v", h.target.Redacted(), redact.String(err.Error())))
	}
	id := fmt.Sprintf("taskorch-%d-%d", t.ID, lease)
	ts := time.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", h.p.cfg.UserAgent)
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	sig := Sign(h.p.cfg.Keys, id, ts, body)
	req.Header.Set(HeaderSignature, sig)
	req.Header.Set(HeaderIdempotencyKey, strconv.FormatInt(lease, 10))
	if deadline != "" {
		req.Header.Set(HeaderDeadline, deadline)
	}
	resp, err := h.p.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text repeats the URL, query and all
		}
		return fmt.Errorf("push to %s: %v", h.target.Redacted(), redact.String(err.Error()))
	}
	defer func() { _ = resp.Body.Close() }()
	return h.outcome(ctx, resp, strings.Fields(sig))
}

// body encodes the request of t, with its parents' results when it has parents.
func (p *pusher) body(ctx context.Context, t *taskorch.Task) ([]byte, string, error) {
	r := Request{TaskID: t.ID, TaskType: t.Type, Payload: t.Payload, Attempt: t.Attempt, MaxAttempts: t.MaxAttempts, WorkflowID: t.WorkflowID}
	if len(r.Payload) == 0 {
		r.Payload = json.RawMessage("null")
	}
	if t.LeaseID != nil {
		r.LeaseID = *t.LeaseID
	}
	if d, ok := ctx.Deadline(); ok {
		r.Deadline = d.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	} else if t.LeaseExpiresAt != nil {
		r.Deadline = t.LeaseExpiresAt.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	if len(t.ParentIDs) > 0 {
		if p.cfg.ParentResults != nil {
			parents, err := p.cfg.ParentResults(ctx, t.ID)
			if err != nil {
				return nil, "", fmt.Errorf("push: read the parents' results: %w", err)
			}
			r.Parents = parents
		} else {
			for _, id := range t.ParentIDs {
				r.Parents = append(r.Parents, taskorch.ParentResult{ID: id})
			}
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, "", taskorch.Discard(fmt.Errorf("push: encode the request: %w", err))
	}
	return b, r.Deadline, nil
}

// outcome turns the endpoint's answer into the handler's return; sent are the signatures the
// request carried, which an error's excerpt of the answer masks like the secrets.
func (h *handler) outcome(ctx context.Context, resp *http.Response, sent []string) error {
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
		if err != nil {
			return fmt.Errorf("push to %s: HTTP %d, then reading its body: %v", h.target.Redacted(), code, err)
		}
		if len(b) > maxResponseBytes {
			return taskorch.Discard(fmt.Errorf("push to %s: HTTP %d with a body over %d bytes, more than a result may hold", h.target.Redacted(), code, maxResponseBytes))
		}
		return setResult(ctx, b)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
	_, _ = io.CopyN(io.Discard, resp.Body, maxErrorBodyBytes) // lets the connection be reused
	msg := fmt.Sprintf("push to %s: HTTP %d %s", h.target.Redacted(), code, http.StatusText(code))
	if ex := h.p.excerpt(b, sent); ex != "" {
		msg += ": " + ex
	}
	switch {
	case code == http.StatusTooManyRequests:
		d := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		return taskorch.RateLimited(errors.New(msg), d)
	case code >= 500:
		return errors.New(msg)
	case code >= 400:
		return taskorch.Discard(errors.New(msg + " (a 4xx is not retried)"))
	case code >= 300:
		return taskorch.Discard(errors.New(msg + " (redirects are not followed: set the final URL)"))
	}
	return errors.New(msg) // 1xx: not an answer
}

// setResult makes a 2xx body the task's result: nothing for an empty body, the JSON as it is, or
// another body as a JSON string.
func setResult(ctx context.Context, b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil
	}
	var v any = json.RawMessage(b)
	if !json.Valid(b) {
		v = strings.ToValidUTF8(string(b), "\uFFFD")
	}
	if err := taskorch.SetResult(ctx, v); err != nil {
		if s := worker.ResultSlotFrom(ctx); s != nil && s.Over() {
			return nil // the worker fails the task with the bound's message
		}
		return taskorch.Discard(err)
	}
	return nil
}

// retryAfter reads a Retry-After value, seconds or an HTTP date, as a wait from now: 0 when
// absent, malformed or past (the worker's default backoff applies), at most maxRetryAfter.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0
		}
		if n > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		d = time.Duration(n) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}

// excerpt is the start of an error answer's body as an error records it: printable, the secrets
// the worker holds, the signatures sent (with or without their "v1,") and key=value secrets
// masked, at most excerptBytes.
func (p *pusher) excerpt(b []byte, sent []string) string {
	s := strings.ToValidUTF8(string(b[:min(len(b), 8*excerptBytes)]), "\uFFFD")
	for _, sig := range sent {
		s = strings.ReplaceAll(s, sig, redact.Mask)
		if v, ok := strings.CutPrefix(sig, "v1,"); ok && v != "" {
			s = strings.ReplaceAll(s, v, redact.Mask)
		}
	}
	for _, sec := range p.secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, redact.Mask)
		}
	}
	s = redact.String(s)
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= excerptBytes {
		return s
	}
	cut := excerptBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
