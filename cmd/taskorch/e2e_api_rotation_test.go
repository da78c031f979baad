package main

import (
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// A token is rotated without a restart: `taskorch api` reads --tokens-file again at SIGHUP, and
// from then on the new token is taken and the removed one refused; a file it cannot take (a
// token mapped to a role off the allow-list) is refused with a log line, and the tokens in use
// stay. No token reaches the log.
func TestAPITokensRotateOnSIGHUP(t *testing.T) {
	t.Parallel()
	db := newAPIDB(t, dbtest.NewDBURL(t))
	file := filepath.Join(t.TempDir(), "tokens")
	oldTok, newTok := hexToken(t, 24), hexToken(t, 24)
	write := func(content string) { require.NoError(t, os.WriteFile(file, []byte(content), 0o600)) }
	write("# the application\n" + db.app + "=" + oldTok + "\n")
	api, url := startAPIProc(t, []string{"DATABASE_URL=" + db.loginURL, "TASKORCH_API_TOKENS=", "TASKORCH_API_ROLES=" + db.app},
		"--tokens-file", file)
	status := func(tok string) int {
		req, err := http.NewRequestWithContext(t.Context(), "GET", url+"/v1/tasks/1", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	waitLine := func(parts ...string) {
		t.Helper()
		select {
		case <-api.out.lineWith(parts...):
		case <-time.After(30 * time.Second):
			t.Fatalf("no log line with %q within 30 s", parts)
		}
	}
	require.Equal(t, http.StatusNotFound, status(oldTok), "authenticated: the task does not exist")
	require.Equal(t, http.StatusUnauthorized, status(newTok))

	write(db.app + "=" + newTok + "\n")
	api.signal(t, syscall.SIGHUP)
	waitLine("API tokens reloaded")
	require.Equal(t, http.StatusNotFound, status(newTok))
	require.Equal(t, http.StatusUnauthorized, status(oldTok), "the removed token is refused")

	write(db.app + "=" + newTok + "\nsomeone_else=" + oldTok + "\n")
	api.signal(t, syscall.SIGHUP)
	waitLine("API tokens not reloaded", "not in --roles")
	require.Equal(t, http.StatusNotFound, status(newTok), "the tokens in use stay")
	require.Equal(t, http.StatusUnauthorized, status(oldTok))

	api.signal(t, syscall.SIGTERM)
	require.Equal(t, 0, api.wait(t))
	require.NotContains(t, api.out.String(), oldTok)
	require.NotContains(t, api.out.String(), newTok)
}
