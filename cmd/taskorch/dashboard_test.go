package main

import (
	"bufio"
	"context"
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
