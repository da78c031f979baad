package httpapi_test

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/httpapi"
)

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// When the database cannot be reached, every route answers 500 (or 503) with a message that
// holds nothing of the error, and the log line that says what failed holds neither the
// database's password nor the token.
func TestAPIInternalErrorsHoldNoSecret(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a port that answers nothing PostgreSQL would
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	const password, token = "db-s3cr3t-password", "api-s3cr3t-token-0123456789"
	pool, err := pgxpool.New(t.Context(), "postgres://taskorch:"+password+"@"+addr+"/db?sslmode=disable&connect_timeout=2")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	auth, err := httpapi.TokenAuth([]httpapi.Token{{Role: "app_user", Value: token}})
	require.NoError(t, err)
	var log lockedBuffer
	h, err := httpapi.New(pool, httpapi.Config{Authenticate: auth, Roles: []string{"app_user"},
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	require.NoError(t, err)
	t.Cleanup(h.Close)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f := &apiFixture{url: srv.URL}
	for _, rt := range h.Routes() {
		path := strings.ReplaceAll(rt.Path, "{id}", "1")
		body := map[string]string{"/v1/tasks": `{"type": "x.y"}`, "/v1/signals": `{"name": "n", "key": "k"}`}[path]
		if rt.Method == "GET" {
			body = ""
		}
		r := f.call(t, token, rt.Method, path, body)
		require.Contains(t, []int{http.StatusInternalServerError, http.StatusServiceUnavailable}, r.status, "%s %s: %s", rt.Method, path, r.body)
		_, msg := r.errorOf(t)
		for _, secret := range []string{password, token, addr, "taskorch:"} {
			require.NotContains(t, string(r.body), secret, "%s %s", rt.Method, path)
		}
		require.NotContains(t, msg, "dial")
	}
	require.Contains(t, log.String(), "api request failed")
	require.NotContains(t, log.String(), password)
	require.NotContains(t, log.String(), token)
}
