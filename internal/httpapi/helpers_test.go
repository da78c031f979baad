package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/httpapi"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// apiFixture is an API server on a test database with two roles and a token each: app, an
// application's role (queues.grant_enqueue and queues.signal: it enqueues, signals and reads
// its own tasks), and ops, an operator's (that, plus select on queues.task, cancel_task and
// retry_task), and a third role, outsider, that has a token but is not on the allow-list.
type apiFixture struct {
	url                string
	pool               *pgxpool.Pool
	app, ops, outsider string // role names
	appTok, opsTok     string
	outsiderTok        string
	handler            *httpapi.Handler
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// newRole creates a NOLOGIN role with a random name, dropped after the test.
func newRole(t *testing.T, pool *pgxpool.Pool, prefix string) string {
	t.Helper()
	name := prefix + "_" + randomHex(t, 5)
	mustExec(t, pool, "create role "+pgx.Identifier{name}.Sanitize()+" nologin")
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		_, _ = pool.Exec(ctx, "drop owned by "+pgx.Identifier{name}.Sanitize())
		_, _ = pool.Exec(ctx, "drop role "+pgx.Identifier{name}.Sanitize())
	})
	return name
}

func mustExec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	_, err := pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err, sql)
}

// grantApp grants role what an application role gets (docs/security.md).
func grantApp(t *testing.T, pool *pgxpool.Pool, role string) {
	t.Helper()
	mustExec(t, pool, `select queues.grant_enqueue($1)`, role)
	mustExec(t, pool, "grant execute on function queues.signal(text, text, jsonb) to "+pgx.Identifier{role}.Sanitize())
}

// grantOps grants role an operator's reads and actions on top of an application's.
func grantOps(t *testing.T, pool *pgxpool.Pool, role string) {
	t.Helper()
	grantApp(t, pool, role)
	id := pgx.Identifier{role}.Sanitize()
	mustExec(t, pool, "grant select on queues.task to "+id)
	mustExec(t, pool, "grant execute on function queues.cancel_task(bigint, text), queues.retry_task(bigint) to "+id)
}

func newAPI(t *testing.T, mutate ...func(*httpapi.Config)) *apiFixture {
	t.Helper()
	pool := dbtest.NewDB(t)
	f := &apiFixture{pool: pool,
		app: newRole(t, pool, "api_app"), ops: newRole(t, pool, "api_ops"), outsider: newRole(t, pool, "api_out"),
		appTok: "app-" + randomHex(t, 16), opsTok: "ops-" + randomHex(t, 16), outsiderTok: "out-" + randomHex(t, 16)}
	grantApp(t, pool, f.app)
	grantOps(t, pool, f.ops)
	grantOps(t, pool, f.outsider)
	auth, err := httpapi.TokenAuth([]httpapi.Token{{Role: f.app, Value: f.appTok}, {Role: f.ops, Value: f.opsTok}, {Role: f.outsider, Value: f.outsiderTok}})
	require.NoError(t, err)
	cfg := httpapi.Config{Authenticate: auth, Roles: []string{f.app, f.ops}}
	for _, m := range mutate {
		m(&cfg)
	}
	h, err := httpapi.New(pool, cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	f.url, f.handler = srv.URL, h
	return f
}

// response is an answer: its status and its body, decoded when it is JSON.
type response struct {
	status int
	body   []byte
}

// call sends a request with token (none when empty) and a raw body.
func (f *apiFixture) call(t *testing.T, token, method, path, body string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, f.url+path, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if resp.StatusCode != http.StatusNoContent {
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"), "%s %s: %s", method, path, b)
	}
	return response{status: resp.StatusCode, body: b}
}

// json decodes the body into a map.
func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), string(r.body))
	return m
}

// errorOf returns the error body's code and message.
func (r response) errorOf(t *testing.T) (code, msg string) {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&e), string(r.body))
	require.NotEmpty(t, e.Error.Code, string(r.body))
	require.NotEmpty(t, e.Error.Message, string(r.body))
	return e.Error.Code, e.Error.Message
}

func scalar[T any](t *testing.T, pool *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&v), sql)
	return v
}

// taskCount is the number of rows of queues.task.
func taskCount(t *testing.T, pool *pgxpool.Pool) int64 {
	return scalar[int64](t, pool, `select count(*) from queues.task`)
}
