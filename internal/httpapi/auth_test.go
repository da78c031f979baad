package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/httpapi"
)

// Every route refuses a request without a token, with a token it does not know (or one sent
// in another scheme), with 401 and nothing written; a known token whose role is not on the
// allow-list is 403; a read-only API refuses the routes that write. No answer quotes a token.
func TestAPIRefusesWithoutAValidToken(t *testing.T) {
	t.Parallel()
	f := newAPI(t)
	id := scalar[int64](t, f.pool, `select queues.enqueue('x.y', '{}')`)
	routes := f.handler.Routes()
	require.Len(t, routes, 7)
	before := taskCount(t, f.pool)
	for _, rt := range routes {
		path := strings.ReplaceAll(rt.Path, "{id}", fmt.Sprint(id))
		body := ""
		if rt.Method == "POST" {
			body = `{"type": "x.y", "name": "n", "key": "k"}`
		}
		for _, tok := range []string{"", "wrong-token-of-sufficient-length", f.opsTok + "x", strings.ToUpper(f.opsTok)} {
			r := f.call(t, tok, rt.Method, path, body)
			require.Equal(t, http.StatusUnauthorized, r.status, "%s %s with %q", rt.Method, path, tok)
			code, _ := r.errorOf(t)
			require.Equal(t, "unauthorized", code)
			require.NotContains(t, string(r.body), f.opsTok)
		}
		// The token in another scheme.
		req, err := http.NewRequestWithContext(t.Context(), rt.Method, f.url+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Basic "+f.opsTok)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		require.Equal(t, `Bearer realm="taskorch"`, resp.Header.Get("WWW-Authenticate"))

		r := f.call(t, f.outsiderTok, rt.Method, path, body)
		require.Equal(t, http.StatusForbidden, r.status, "%s %s as a role not allowed", rt.Method, path)
		require.NotContains(t, string(r.body), f.outsiderTok)
	}
	require.Equal(t, before, taskCount(t, f.pool), "a refused request wrote a task")
	require.Equal(t, "pending", scalar[string](t, f.pool, `select status::text from queues.task where task_id = $1`, id))

	ro := newAPI(t, func(c *httpapi.Config) { c.ReadOnly = true })
	r := ro.call(t, ro.opsTok, "POST", "/v1/tasks", `{"type": "x.y"}`)
	require.Equal(t, http.StatusForbidden, r.status)
	require.Equal(t, int64(0), taskCount(t, ro.pool))
	r = ro.call(t, ro.opsTok, "GET", "/v1/tasks", "")
	require.Equal(t, http.StatusOK, r.status)
}

// TokenAuth and ParseTokens refuse what cannot be a token mapping, and never quote a token.
func TestTokenConfigErrors(t *testing.T) {
	t.Parallel()
	secret := "s3cr3t-token-value-0123456789"
	for name, toks := range map[string][]httpapi.Token{
		"none":      nil,
		"short":     {{Role: "app", Value: "short"}},
		"twice":     {{Role: "app", Value: secret}, {Role: "ops", Value: secret}},
		"bad role":  {{Role: `app"; drop table x; --`, Value: secret}},
		"no role":   {{Role: "", Value: secret}},
		"long role": {{Role: strings.Repeat("r", 64), Value: secret}},
	} {
		_, err := httpapi.TokenAuth(toks)
		require.Error(t, err, name)
		require.NotContains(t, err.Error(), secret, name)
	}
	for _, s := range []string{"app", "app=", "=" + secret, "app=" + secret + ",ops"} {
		_, err := httpapi.ParseTokens(s)
		require.Error(t, err, s)
		require.NotContains(t, err.Error(), secret, s)
	}
	toks, err := httpapi.ParseTokens("app=" + secret + ", ops=" + secret + "-2\n\nops=" + secret + "-3")
	require.NoError(t, err)
	require.Equal(t, []httpapi.Token{{Role: "app", Value: secret}, {Role: "ops", Value: secret + "-2"}, {Role: "ops", Value: secret + "-3"}}, toks)
	auth, err := httpapi.TokenAuth(toks)
	require.NoError(t, err)
	for tok, want := range map[string]string{secret: "app", secret + "-2": "ops", secret + "-3": "ops", secret + "-4": ""} {
		req, _ := http.NewRequest("GET", "/", nil)
		req.Header.Set("Authorization", "bearer "+tok)
		role, ok := auth(req)
		require.Equal(t, want != "", ok, tok)
		require.Equal(t, want, role)
	}
}
