package providers_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/s3test"
	"github.com/taskorch/taskorch/providers"
)

const filesToken = "files-service-token-4c2e"

var bucketSeq atomic.Int64

// newBucket creates a bucket of the test's own on the gateway.
func newBucket(t *testing.T, gw *s3test.Gateway) string {
	t.Helper()
	b := fmt.Sprintf("bucket-%d-%d", time.Now().UnixNano()%1e6, bucketSeq.Add(1))
	gw.CreateBucket(t, b)
	return b
}

func newS3Signer(t *testing.T, gw *s3test.Gateway, secret string) *providers.S3Signer {
	t.Helper()
	p, err := providers.NewS3Signer(providers.S3SignerConfig{Endpoint: gw.Endpoint, Region: s3test.Region,
		AccessKeyID: s3test.AccessKeyID, SecretAccessKey: secret})
	require.NoError(t, err)
	return p
}

// filesService is a files HTTP service in the test: it answers POST /sign (the protocol of
// docs/providers.md) with a DELETE URL presigned by the AWS SDK for the gateway, tampered as
// the test asks.
type filesService struct {
	*httptest.Server
	tamper func(u *url.URL) // nil: an honest URL

	mu   sync.Mutex
	urls []string
}

func newFilesService(t *testing.T, gw *s3test.Gateway, tamper func(u *url.URL)) *filesService {
	t.Helper()
	signer := newS3Signer(t, gw, s3test.SecretAccessKey)
	s := &filesService{tamper: tamper}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+filesToken {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"bad or missing bearer token"}`)
			return
		}
		var req providers.SignRequest
		if r.Method != http.MethodPost || r.URL.Path != "/sign" || json.NewDecoder(r.Body).Decode(&req) != nil || req.Method != http.MethodDelete {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"want POST /sign {bucket, object_key, method: DELETE}"}`)
			return
		}
		signed, headers, err := signer.Presign(r.Context(), req.Bucket, req.ObjectKey)
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		u, err := url.Parse(signed)
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if s.tamper != nil {
			s.tamper(u)
		}
		s.mu.Lock()
		s.urls = append(s.urls, signed, u.String())
		s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(providers.SignResponse{URL: u.String(), Headers: headers,
			ExpiresAt: time.Now().Add(providers.DefaultPresignExpires).UTC().Format(time.RFC3339)})
	}))
	t.Cleanup(s.Close)
	return s
}

// signatures returns the signatures of the URLs the service gave.
func (s *filesService) signatures() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, raw := range s.urls {
		u, _ := url.Parse(raw)
		out = append(out, u.Query().Get("X-Amz-Signature"))
	}
	return out
}

func newHTTPSigner(t *testing.T, signerURL string) *providers.HTTPSigner {
	t.Helper()
	p, err := providers.NewHTTPSigner(providers.HTTPSignerConfig{URL: signerURL, Token: filesToken})
	require.NoError(t, err)
	return p
}

func fileReq(bucket, key string) map[string]any {
	return map[string]any{"bucket": bucket, "object_key": key, "file_id": 987, "file_deletion_task_id": 42}
}

// TestFileDelete runs the file_delete providers against a real S3-compatible gateway
// (versitygw) that checks signatures.
func TestFileDelete(t *testing.T) {
	t.Parallel()
	gw := s3test.Start(t)

	t.Run("s3 signer deletes the object", func(t *testing.T) {
		t.Parallel()
		b := newBucket(t, gw)
		gw.PutObject(t, b, "users/7/avatar.png", "png")
		resp, err := newS3Signer(t, gw, s3test.SecretAccessKey).Call(t.Context(), call(t, fileReq(b, "users/7/avatar.png")))
		require.NoError(t, err)
		require.Equal(t, map[string]any{"provider": "s3", "bucket": b, "object_key": "users/7/avatar.png",
			"http_status": float64(204), "already_gone": false}, decode(t, resp))
		require.False(t, gw.ObjectExists(t, b, "users/7/avatar.png"))

		// Keys that need escaping are signed and sent as S3 expects.
		const odd = "users/7/my photo+1 (é).png"
		gw.PutObject(t, b, odd, "png")
		_, err = newS3Signer(t, gw, s3test.SecretAccessKey).Call(t.Context(), call(t, fileReq(b, odd)))
		require.NoError(t, err)
		require.False(t, gw.ObjectExists(t, b, odd))
	})

	t.Run("s3 signer: an object already gone is deleted", func(t *testing.T) {
		t.Parallel()
		b := newBucket(t, gw)
		p := newS3Signer(t, gw, s3test.SecretAccessKey)
		gw.PutObject(t, b, "x", "x")
		_, err := p.Call(t.Context(), call(t, fileReq(b, "x")))
		require.NoError(t, err)
		resp, err := p.Call(t.Context(), call(t, fileReq(b, "x")))
		require.NoError(t, err)
		require.Equal(t, "s3", decode(t, resp)["provider"])
	})

	t.Run("s3 signer: a missing bucket is permanent", func(t *testing.T) {
		t.Parallel()
		_, err := newS3Signer(t, gw, s3test.SecretAccessKey).Call(t.Context(), call(t, fileReq("no-such-bucket-here", "x")))
		pe := requirePermanent(t, err)
		require.Equal(t, 404, pe.StatusCode)
		require.Equal(t, "NoSuchBucket", pe.Code)
		require.Contains(t, err.Error(), "s3: 404 NoSuchBucket: DELETE refused by the storage")
	})

	t.Run("s3 signer: a wrong secret is refused", func(t *testing.T) {
		t.Parallel()
		b := newBucket(t, gw)
		gw.PutObject(t, b, "keep", "x")
		const wrong = "wrong-secret-key-0000"
		_, err := newS3Signer(t, gw, wrong).Call(t.Context(), call(t, fileReq(b, "keep")))
		pe := requirePermanent(t, err)
		require.Equal(t, 403, pe.StatusCode)
		require.Equal(t, "SignatureDoesNotMatch", pe.Code)
		require.Contains(t, err.Error(), "s3: 403 SignatureDoesNotMatch: the storage refused the signed DELETE URL")
		requireNoSecret(t, err, wrong, s3test.SecretAccessKey)
		require.True(t, gw.ObjectExists(t, b, "keep"))
	})

	t.Run("http signer deletes the object", func(t *testing.T) {
		t.Parallel()
		b := newBucket(t, gw)
		gw.PutObject(t, b, "docs/report.pdf", "pdf")
		svc := newFilesService(t, gw, nil)
		p := newHTTPSigner(t, svc.URL+"/sign")
		resp, err := p.Call(t.Context(), call(t, fileReq(b, "docs/report.pdf")))
		require.NoError(t, err)
		require.Equal(t, map[string]any{"provider": "files_http", "bucket": b, "object_key": "docs/report.pdf",
			"http_status": float64(204), "already_gone": false}, decode(t, resp))
		require.False(t, gw.ObjectExists(t, b, "docs/report.pdf"))
		// Again: already gone, still a success.
		_, err = p.Call(t.Context(), call(t, fileReq(b, "docs/report.pdf")))
		require.NoError(t, err)
	})

	t.Run("http signer: a tampered signature is refused", func(t *testing.T) {
		t.Parallel()
		b := newBucket(t, gw)
		gw.PutObject(t, b, "keep", "x")
		svc := newFilesService(t, gw, func(u *url.URL) {
			q := u.Query()
			sig := q.Get("X-Amz-Signature")
			last := "0"
			if strings.HasSuffix(sig, "0") {
				last = "1"
			}
			q.Set("X-Amz-Signature", sig[:len(sig)-1]+last)
			u.RawQuery = q.Encode()
		})
		_, err := newHTTPSigner(t, svc.URL+"/sign").Call(t.Context(), call(t, fileReq(b, "keep")))
		pe := requirePermanent(t, err)
		require.Equal(t, 403, pe.StatusCode)
		require.Contains(t, err.Error(), "files_http: 403 SignatureDoesNotMatch: the storage refused the signed DELETE URL")
		requireNoSecret(t, err, svc.signatures()...)
		requireNoSecret(t, err, filesToken, s3test.SecretAccessKey)
		require.True(t, gw.ObjectExists(t, b, "keep"))
	})

	t.Run("http signer: a URL for another key is refused", func(t *testing.T) {
		t.Parallel()
		b := newBucket(t, gw)
		gw.PutObject(t, b, "asked", "x")
		gw.PutObject(t, b, "other", "x")
		svc := newFilesService(t, gw, func(u *url.URL) {
			u.Path = strings.Replace(u.Path, "/asked", "/other", 1)
			u.RawPath = ""
		})
		_, err := newHTTPSigner(t, svc.URL+"/sign").Call(t.Context(), call(t, fileReq(b, "asked")))
		pe := requirePermanent(t, err)
		require.Equal(t, 403, pe.StatusCode)
		requireNoSecret(t, err, svc.signatures()...)
		require.True(t, gw.ObjectExists(t, b, "asked"))
		require.True(t, gw.ObjectExists(t, b, "other"))
	})

	t.Run("http signer: the files service's answers", func(t *testing.T) {
		t.Parallel()
		svc := newFilesService(t, gw, nil)
		noToken, err := providers.NewHTTPSigner(providers.HTTPSignerConfig{URL: svc.URL + "/sign"})
		require.NoError(t, err)
		_, err = noToken.Call(t.Context(), call(t, fileReq("b", "k")))
		pe := requirePermanent(t, err)
		require.Equal(t, "files_http: 401: the files service refused to sign: bad or missing bearer token", pe.Error())

		for _, tt := range []struct {
			status    int
			body      string
			permanent bool
			want      string
		}{
			{500, `{"error":"storage backend unavailable"}`, false, "files_http: 500: the files service refused to sign: storage backend unavailable"},
			{503, `<html>down</html>`, false, "files_http: 503: the files service refused to sign: <html>down</html>"},
			{200, `{"url":`, false, "files_http: could not parse the provider's response (HTTP 200): files service: "},
			{200, `{"expires_at":"2030-01-01T00:00:00Z"}`, false, `"url" is not an absolute http(s) URL`},
			{400, `{"error":"unknown bucket"}`, true, "files_http: 400: the files service refused to sign: unknown bucket"},
		} {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			_, err := newHTTPSigner(t, srv.URL).Call(t.Context(), call(t, fileReq("b", "k")))
			srv.Close()
			if tt.permanent {
				requirePermanent(t, err)
			} else {
				requireRetriable(t, err)
			}
			require.Contains(t, err.Error(), tt.want)
			requireNoSecret(t, err, filesToken)
		}
	})
}

func TestFileDeleteBadRequests(t *testing.T) {
	t.Parallel()
	p, err := providers.NewS3Signer(providers.S3SignerConfig{Endpoint: "http://127.0.0.1:1", AccessKeyID: "k", SecretAccessKey: "s"})
	require.NoError(t, err)
	for req, want := range map[string]string{
		`{"object_key":"k"}`:          `s3: bad request: "bucket" is missing`,
		`{"bucket":"b"}`:              `s3: bad request: "object_key" is missing`,
		`{"bucket":"b","object_key":`: `s3: bad request: the request is not valid`,
	} {
		_, err := p.Call(t.Context(), call(t, req))
		requirePermanent(t, err)
		require.ErrorContains(t, err, want)
	}
}

func TestRedactsSignedURLs(t *testing.T) {
	t.Parallel()
	// A storage that cannot be reached: the transport error quotes the URL, without its signature.
	p, err := providers.NewS3Signer(providers.S3SignerConfig{Endpoint: "http://127.0.0.1:1", AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI"})
	require.NoError(t, err)
	signed, _, err := p.Presign(t.Context(), "b", "k")
	require.NoError(t, err)
	u, err := url.Parse(signed)
	require.NoError(t, err)
	sig := u.Query().Get("X-Amz-Signature")
	require.NotEmpty(t, sig)

	_, err = p.Call(t.Context(), call(t, fileReq("b", "k")))
	pe := requireRetriable(t, err)
	require.Contains(t, pe.Error(), "X-Amz-Signature=[REDACTED]")
	require.Contains(t, pe.Error(), "X-Amz-Credential=[REDACTED]")
	require.NotContains(t, pe.Error(), "AKIDEXAMPLE")
	requireNoSecret(t, err, "wJalrXUtnFEMI")
}
