package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

func httpGet(t *testing.T, url, token string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	return resp.StatusCode
}

func TestDashboardCommand(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan result, 1)
	go func() {
		cmd := newRootCmd()
		cmd.SetArgs([]string{"dashboard", "--addr", "127.0.0.1:0", "--database-url", url})
		cmd.SetOut(pw)
		cmd.SetErr(io.Discard)
		err := cmd.ExecuteContext(ctx)
		_ = pw.Close()
		done <- result{code: exitCode(err)}
	}()
	// The URL and the generated token are printed on lines of their own.
	sc := bufio.NewScanner(pr)
	var dashURL, token string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "http://127.0.0.1:"):
			dashURL = line
		case strings.HasPrefix(line, "Sign in with this token"):
			require.True(t, sc.Scan())
			token = sc.Text()
		}
		if dashURL != "" && token != "" {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	require.NotEmpty(t, dashURL)
	require.Len(t, token, 43)
	require.Equal(t, http.StatusUnauthorized, httpGet(t, dashURL, ""))
	require.Equal(t, http.StatusOK, httpGet(t, dashURL, token))
	require.Equal(t, http.StatusOK, httpGet(t, dashURL+"tasks", token))
	cancel()
	select {
	case r := <-done:
		require.Equal(t, exitOK, r.code)
	case <-time.After(30 * time.Second):
		t.Fatal("taskorch dashboard did not stop")
	}
}

func TestDashboardReadOnlyAndToken(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ro, err := startDashboard(t.Context(), pool, dashboardOptions{Addr: "127.0.0.1:0", ReadOnly: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, ro.Stop(context.WithoutCancel(t.Context()))) })
	require.Empty(t, ro.Token, "read-only without a token: none is generated")
	require.Equal(t, http.StatusOK, httpGet(t, ro.URL, ""))
	var out strings.Builder
	printDashboard(&out, ro)
	require.Contains(t, out.String(), "\n"+ro.URL+"\n")
	require.Contains(t, out.String(), "Read-only")

	given := "a-token-chosen-by-the-operator"
	d, err := startDashboard(t.Context(), pool, dashboardOptions{Addr: "127.0.0.1:0", Token: given})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Stop(context.WithoutCancel(t.Context()))) })
	require.Equal(t, http.StatusOK, httpGet(t, d.URL, given))
	out.Reset()
	printDashboard(&out, d)
	require.NotContains(t, out.String(), given, "a token the operator chose is not printed")

	_, err = startDashboard(t.Context(), pool, dashboardOptions{Addr: "127.0.0.1:0", Token: "short"})
	require.Error(t, err)
}

func TestDashboardHelpHidesTheToken(t *testing.T) {
	t.Setenv(envDashboardToken, "secret-token-from-the-environment")
	r := run(t, "dashboard", "--help")
	require.Equal(t, exitOK, r.code)
	require.Contains(t, r.out, "--read-only")
	require.NotContains(t, r.out, "secret-token-from-the-environment")
}

// taskorch dashboard --log-format json --access-log: one JSON line per request, with its status,
// duration in seconds and who made it; no token or query string in it. A bad format is refused.
func TestDashboardJSONAccessLog(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	var logs syncBuffer
	const annToken = "ann-token-0123456789abcdef"
	d, err := startDashboard(t.Context(), pool, dashboardOptions{Addr: "127.0.0.1:0", Tokens: map[string]string{"ann": annToken},
		Log: &logs, LogFormat: "json", AccessLog: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Stop(context.WithoutCancel(t.Context()))) })
	require.Equal(t, http.StatusOK, httpGet(t, d.URL+"tasks?status=dead", annToken))
	require.Equal(t, http.StatusUnauthorized, httpGet(t, d.URL+"workers", ""))

	var lines []map[string]any
	require.Eventually(t, func() bool {
		lines = lines[:0]
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &m), l)
			if m["msg"] == "request" {
				lines = append(lines, m)
			}
		}
		return len(lines) == 2
	}, 10*time.Second, 10*time.Millisecond, logs.String())
	require.Equal(t, "GET", lines[0]["method"])
	require.Equal(t, "/tasks", lines[0]["path"])
	require.Equal(t, 200.0, lines[0]["status"])
	require.Equal(t, "dashboard:ann", lines[0]["actor"])
	require.Equal(t, "dashboard", lines[0]["component"])
	require.IsType(t, 0.0, lines[0]["duration"])
	require.Less(t, lines[0]["duration"].(float64), 60.0, "seconds, not nanoseconds")
	require.Positive(t, lines[0]["bytes"])
	require.Equal(t, 401.0, lines[1]["status"])
	require.NotContains(t, lines[1], "actor")
	require.NotContains(t, logs.String(), annToken)
	require.NotContains(t, logs.String(), "status=dead")

	_, err = startDashboard(t.Context(), pool, dashboardOptions{Addr: "127.0.0.1:0", ReadOnly: true, LogFormat: "yaml"})
	require.ErrorContains(t, err, `log format "yaml": want text or json`)
}
