package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/taskorch/taskorch"
)

// HTTPSignerConfig configures the http files signer.
type HTTPSignerConfig struct {
	// URL is the files service's signing endpoint, e.g. "https://files.internal/v1/sign".
	// Required.
	URL string
	// Token, when set, is sent as "Authorization: Bearer <Token>" to the files service (never
	// to the storage).
	Token string
	// Timeout bounds each of the two requests. Defaults to DefaultTimeout. Ignored with
	// HTTPClient.
	Timeout time.Duration
	// HTTPClient makes the requests. Defaults to a client with Timeout.
	HTTPClient *http.Client
}

// SignRequest is what the http signer POSTs (as JSON) to the files service.
type SignRequest struct {
	Bucket    string `json:"bucket"`
	ObjectKey string `json:"object_key"`
	// Method is the HTTP method the URL is for: "DELETE".
	Method string `json:"method"`
}

// SignResponse is what the files service answers (200, JSON).
type SignResponse struct {
	// URL is the signed URL (absolute, http or https). Required.
	URL string `json:"url"`
	// ExpiresAt is when the URL stops working (RFC 3339); informational.
	ExpiresAt string `json:"expires_at,omitempty"`
	// Headers are sent with the DELETE, for signatures that cover headers.
	Headers map[string]string `json:"headers,omitempty"`
}

// signError is the files service's error answer: {"error": "..."}.
type signError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// HTTPSigner deletes files in two steps: it asks the files service for a signed
// DELETE URL for (bucket, object_key), then sends the DELETE to the storage. The files service
// holds the storage credentials; the worker holds none.
type HTTPSigner struct {
	url   string
	token string
	hc    *http.Client
	red   redactor
}

// NewHTTPSigner returns an http files signer.
func NewHTTPSigner(cfg HTTPSignerConfig) (*HTTPSigner, error) {
	if cfg.URL == "" {
		return nil, errors.New("files_http: the files service URL is empty (TASKORCH_FILES_SIGNER_URL)")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("files_http: TASKORCH_FILES_SIGNER_URL is not an http(s) URL")
	}
	return &HTTPSigner{url: cfg.URL, token: cfg.Token, hc: httpClient(cfg.HTTPClient, cfg.Timeout, nil), red: newRedactor(cfg.Token)}, nil
}

// Call deletes the object of call.Request (a FileDeleteRequest) and returns
// {"provider":"files_http","bucket":...,"object_key":...,"http_status":204,"already_gone":false}.
func (p *HTTPSigner) Call(ctx context.Context, call taskorch.ChannelCall) (json.RawMessage, error) {
	req, err := parseFileDelete("files_http", call)
	if err != nil {
		return nil, err
	}
	signed, err := p.sign(ctx, req)
	if err != nil {
		return nil, err
	}
	return deleteSigned(ctx, p.hc, "files_http", p.red, req, signed.URL, signed.Headers)
}

func (p *HTTPSigner) sign(ctx context.Context, req FileDeleteRequest) (SignResponse, error) {
	var out SignResponse
	body, _ := json.Marshal(SignRequest{Bucket: req.Bucket, ObjectKey: req.ObjectKey, Method: http.MethodDelete})
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return out, p.red.newError("files_http", 0, "", "files service: "+err.Error(), true).result()
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if p.token != "" {
		hreq.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := p.hc.Do(hreq)
	if err != nil {
		return out, p.red.transportError(ctx, "files_http", fmt.Errorf("files service: %w", err))
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return out, p.red.transportError(ctx, "files_http", fmt.Errorf("files service: %w", err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e signError
		msg := snippet(raw)
		if json.Unmarshal(raw, &e) == nil && (e.Error != "" || e.Message != "") {
			msg = e.Error
			if msg == "" {
				msg = e.Message
			}
		}
		return out, p.red.httpStatusError("files_http", resp.StatusCode, "", "the files service refused to sign: "+msg)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, p.red.unparseable("files_http", resp.StatusCode, fmt.Errorf("files service: %w", err))
	}
	u, err := url.Parse(out.URL)
	if out.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return out, p.red.unparseable("files_http", resp.StatusCode, errors.New(`files service: "url" is not an absolute http(s) URL`))
	}
	return out, nil
}

// storageError is the XML error body of S3 and S3-compatible stores (and GCS's XML API).
type storageError struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// deleteSigned sends DELETE to a signed URL and maps the answer: 2xx is deleted; 404 is
// already gone (success, the deletion is idempotent) unless the bucket does not exist; 403 is
// a refused signature (permanent); other 4xx are permanent, 5xx retriable. The URL's query
// values never reach an error message.
func deleteSigned(ctx context.Context, hc *http.Client, provider string, red redactor, req FileDeleteRequest,
	signedURL string, headers map[string]string) (json.RawMessage, error) {
	if u, err := url.Parse(signedURL); err == nil {
		for name, vals := range u.Query() {
			if sensitiveParam(name) {
				red = red.with(vals...)
			}
		}
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodDelete, signedURL, nil)
	if err != nil {
		return nil, red.newError(provider, 0, "", "signed URL: "+err.Error(), true).result()
	}
	for k, v := range headers {
		if http.CanonicalHeaderKey(k) == "Host" {
			continue
		}
		hreq.Header.Set(k, v)
	}
	resp, err := hc.Do(hreq)
	if err != nil {
		return nil, red.transportError(ctx, provider, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	var se storageError
	_ = xml.Unmarshal(raw, &se)
	status := resp.StatusCode
	gone := false
	switch {
	case status >= 200 && status <= 299:
	case status == http.StatusNotFound && se.Code != "NoSuchBucket":
		gone = true
	case status == http.StatusForbidden:
		msg := "the storage refused the signed DELETE URL (a bad or expired signature, or a signer without permission)"
		if se.Message != "" {
			msg += ": " + se.Message
		}
		return nil, red.newError(provider, status, se.Code, msg, true).result()
	default:
		msg := se.Message
		if msg == "" && se.Code == "" {
			msg = snippet(raw)
		}
		return nil, red.httpStatusError(provider, status, se.Code, "DELETE refused by the storage: "+msg)
	}
	return json.Marshal(map[string]any{
		"provider": provider, "bucket": req.Bucket, "object_key": req.ObjectKey,
		"http_status": status, "already_gone": gone,
	})
}
