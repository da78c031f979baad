package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// apiToolsDir is where the pinned Node tools live (api/package-lock.json).
const apiToolsDir = "../../api"

// npmOnce installs the pinned tools once per test run when they are not installed.
var npmOnce struct {
	sync.Once
	err error
}

// apiTools returns the api/ directory with its Node tools installed (npm ci from the lock file
// when node_modules is missing). It skips the test only when node is not installed.
func apiTools(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the generated TypeScript client cannot run (scripts/install-deps.sh test installs it; CI runs it)")
	}
	dir, err := filepath.Abs(apiToolsDir)
	require.NoError(t, err)
	npmOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", "tsx")); err == nil {
			return
		}
		out, err := exec.Command("npm", "ci", "--prefix", dir, "--no-audit", "--no-fund").CombinedOutput()
		if err != nil {
			npmOnce.err = &buildError{out: string(out), err: err}
		}
	})
	require.NoError(t, npmOnce.err, "npm ci in api/ (make api-tools)")
	return dir
}

// runTool runs one of api/'s tools with env, failing the test with its output when it fails.
func runTool(t *testing.T, dir string, env []string, tool string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(dir, "node_modules", ".bin", tool), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", tool, strings.Join(args, " "), out)
	return string(out)
}

// A client generated from openapi.yaml in TypeScript (openapi-typescript's types, openapi-fetch's
// calls, type-checked by tsc) drives a real `taskorch api` process, logged in as a role that is
// only a member of the two mapped roles, on a real PostgreSQL, with a real worker running the
// tasks: refused without a token or with a wrong one; as the application's role, enqueue
// (idempotently), get, wait until the worker completed the task, and signal, while cancelling,
// listing and reading the operator's task are refused; as the operator's role, enqueue after it
// with a schedule, get, list and page, cancel, retry, and 409 on a completed task. The
// database then holds what the client was told.
func TestE2EAPIGeneratedTypeScriptClient(t *testing.T) {
	t.Parallel()
	dir := apiTools(t)
	db := newAPIDB(t, dbtest.NewDBURL(t))
	startWorkerProc(t, db.ownerURL)
	api, url := startAPIProc(t, []string{"DATABASE_URL=" + db.loginURL, db.tokensEnv(), "TASKORCH_API_ROLES=" + db.app + "," + db.ops})

	runTool(t, dir, nil, "openapi-typescript", "../openapi.yaml", "-o", "client/schema.d.ts")
	runTool(t, dir, nil, "tsc", "-p", "client")
	out := runTool(t, dir, []string{"API_URL=" + url, "APP_TOKEN=" + db.appTok, "OPS_TOKEN=" + db.opsTok}, "tsx", "client/drive.ts")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var ids struct{ Noop, Later int64 }
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &ids), out)

	require.Equal(t, "completed", q[string](t, db.pool, `select status::text from queues.task where task_id = $1`, ids.Noop))
	require.Equal(t, db.app, q[string](t, db.pool, `select enqueued_by from queues.task where task_id = $1`, ids.Noop))
	require.JSONEq(t, `{"from": "typescript"}`, q[string](t, db.pool, `select payload::text from queues.task where task_id = $1`, ids.Noop),
		"the duplicate enqueue changed nothing")
	require.Equal(t, "cancelled", q[string](t, db.pool, `select status::text from queues.task where task_id = $1`, ids.Later))
	require.Equal(t, db.ops, q[string](t, db.pool, `select enqueued_by from queues.task where task_id = $1`, ids.Later))
	require.Equal(t, int64(2), q[int64](t, db.pool, `select count(*) from queues.task`), "the refused and bad requests wrote no task")
	require.Equal(t, int64(1), q[int64](t, db.pool, `select count(*) from queues.signal where name = 'ts.event'`))

	// No token or DSN in its log.
	api.signal(t, syscall.SIGTERM)
	require.Equal(t, 0, api.wait(t))
	log := api.out.String()
	for _, secret := range []string{db.appTok, db.opsTok, ":pw@", "password"} {
		require.NotContains(t, log, secret)
	}
}

// `taskorch api` answers its routes over a real process: /healthz without a token, the API
// with one; it refuses at start (exit 2, naming the role, never a token) a configuration that
// cannot work.
func TestAPICommandStartErrors(t *testing.T) {
	t.Parallel()
	db := newAPIDB(t, dbtest.NewDBURL(t))
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no roles", []string{db.tokensEnv()}, nil, "no roles"},
		{"no tokens", nil, []string{"--roles", db.app}, "no token"},
		{"role not allowed", []string{db.tokensEnv()}, []string{"--roles", db.app}, "not in --roles"},
		{"malformed role", []string{db.tokensEnv()}, []string{"--roles", db.app + `,x"y`}, "not a plain SQL identifier"},
		{"short token", []string{"TASKORCH_API_TOKENS=" + db.app + "=short"}, []string{"--roles", db.app}, "shorter than 16"},
		{"unknown role", []string{"TASKORCH_API_TOKENS=nobody_" + db.app + "=" + db.appTok}, []string{"--roles", "nobody_" + db.app}, "does not exist"},
		{"superuser", []string{"TASKORCH_API_TOKENS=postgres=" + db.appTok}, []string{"--roles", "postgres"}, "is a superuser"},
		{"max wait", []string{db.tokensEnv(), "TASKORCH_API_MAX_WAIT=soon"}, []string{"--roles", db.app + "," + db.ops}, "TASKORCH_API_MAX_WAIT"},
	}
	for _, c := range cases {
		cmd := exec.CommandContext(t.Context(), taskorchBinary(t), append([]string{"api", "--addr", "127.0.0.1:0"}, c.args...)...)
		cmd.Env = append(os.Environ(), append([]string{"DATABASE_URL=" + db.loginURL, "TASKORCH_API_TOKENS=", "TASKORCH_API_ROLES="}, c.env...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%s: %s", c.name, out)
		require.Equal(t, 2, ee.ExitCode(), "%s: %s", c.name, out)
		require.Contains(t, string(out), c.want, c.name)
		require.NotContains(t, string(out), db.appTok, c.name)
		require.NotContains(t, string(out), db.opsTok, c.name)
		require.NotContains(t, string(out), ":pw@", c.name)
	}
	// A login that is not a member of the role it would act as.
	_, err := db.pool.Exec(context.Background(), `create role `+db.app+`_other nologin`)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = db.pool.Exec(context.Background(), `drop role `+db.app+`_other`) })
	cmd := exec.CommandContext(t.Context(), taskorchBinary(t), "api", "--addr", "127.0.0.1:0", "--roles", db.app+"_other")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+db.loginURL, "TASKORCH_API_TOKENS="+db.app+"_other="+db.appTok)
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "is not a member of role")
	require.Contains(t, string(out), "grant "+db.app+"_other to "+db.login)

	_, url := startAPIProc(t, []string{"DATABASE_URL=" + db.loginURL, db.tokensEnv(), "TASKORCH_API_ROLES=" + db.app + "," + db.ops})
	resp, err := http.Get(url + "/healthz")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = http.Get(url + "/v1/tasks")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}
