package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// unit is a systemd unit file: each section's keys, with every value in order.
type unit map[string]map[string][]string

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	u, section := unit{}, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok, "%s: %q is not key=value", path, line)
			require.NotEmpty(t, section, "%s: %q before any section", path, line)
			u[section][k] = append(u[section][k], v)
		}
	}
	require.NoError(t, sc.Err())
	return u
}

// unitFiles lists deploy/systemd/*.service (docs/deployment.md shows them).
func unitFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../deploy/systemd/*.service")
	require.NoError(t, err)
	require.Len(t, files, 3, "deploy/systemd: the worker's, the dashboard's and the HTTP API's units")
	return files
}

// The shipped systemd units start real taskorch commands with flags that exist, set only
// documented variables, and give the worker's graceful stop the time it takes.
func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	docs := ""
	for _, d := range []string{"configuration.md", "dashboard.md"} {
		b, err := os.ReadFile(filepath.Join("../../docs", d))
		require.NoError(t, err)
		docs += string(b)
	}
	varName := regexp.MustCompile(`\b(DATABASE_URL|TASKORCH_[A-Z0-9_]+)\b`)
	for _, path := range unitFiles(t) {
		u := readUnit(t, path)
		svc := u["Service"]
		require.NotNil(t, svc, path)

		// ExecStart: /usr/local/bin/taskorch COMMAND [flags], every flag known to that command.
		require.Len(t, svc["ExecStart"], 1, path)
		require.NotContains(t, svc["ExecStart"][0], `"`, "%s: no quoting in ExecStart, the test splits on spaces", path)
		args := strings.Fields(svc["ExecStart"][0])
		require.Equal(t, "/usr/local/bin/taskorch", args[0], path)
		cmd, rest, err := newRootCmd().Find(args[1:])
		require.NoError(t, err, path)
		require.True(t, cmd.Runnable() && cmd.HasParent(), "%s: %v is not a taskorch command", path, args[1:])
		require.NoError(t, cmd.ParseFlags(rest), "%s: %s", path, svc["ExecStart"][0])
		require.Empty(t, cmd.Flags().Args(), "%s: stray arguments", path)
		require.Contains(t, []string{"worker", "dashboard", "api"}, cmd.Name(), path)

		// Every variable the unit names, set or in a comment, is documented.
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, name := range varName.FindAllString(string(raw), -1) {
			require.Contains(t, docs, "`"+name+"`", "%s names %s, which docs/configuration.md and docs/dashboard.md do not", path, name)
		}
		env := map[string]string{}
		for _, e := range svc["Environment"] {
			k, v, ok := strings.Cut(e, "=")
			require.True(t, ok, "%s: Environment=%s", path, e)
			env[k] = v
		}

		require.Equal(t, []string{"SIGTERM"}, svc["KillSignal"], path)
		require.Equal(t, []string{"on-failure"}, svc["Restart"], path)
		require.Equal(t, []string{"yes"}, svc["NoNewPrivileges"], path)
		require.Equal(t, []string{"strict"}, svc["ProtectSystem"], path)
		require.Len(t, svc["EnvironmentFile"], 1, path)
		require.Len(t, svc["TimeoutStopSec"], 1, path)
		stop, err := time.ParseDuration(svc["TimeoutStopSec"][0])
		require.NoError(t, err, path)
		if cmd.Name() == "worker" {
			// At SIGTERM the worker stops claiming, lets tasks run for the grace, then cancels
			// the rest and gives them back to pending before it exits: systemd must leave it
			// that time, and a margin, before its SIGKILL.
			grace, err := time.ParseDuration(env["TASKORCH_SHUTDOWN_GRACE"])
			require.NoError(t, err, "%s sets TASKORCH_SHUTDOWN_GRACE", path)
			require.Greater(t, stop, grace+10*time.Second, "%s: TimeoutStopSec must exceed the grace plus 10 s", path)
			require.Equal(t, "false", env["TASKORCH_MIGRATE"], "%s: the least-privilege user may not migrate", path)
		} else {
			require.Greater(t, stop, 10*time.Second, "%s: the dashboard and the API wait up to 10 s for requests in flight", path)
		}
	}
}

// systemd itself accepts the units: systemd-analyze verify prints nothing for them (it exits 0
// on an unknown key, so its output is what counts). ExecStart must name an executable that
// exists, so the test verifies copies that start the binary the end-to-end tests build.
func TestSystemdAnalyzeVerify(t *testing.T) {
	t.Parallel()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (package systemd); TestSystemdUnits still checks the units")
	}
	bin := taskorchBinary(t)
	dir := t.TempDir()
	var paths []string
	for _, path := range unitFiles(t) {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		body := strings.ReplaceAll(string(raw), "/usr/local/bin/taskorch", bin)
		p := filepath.Join(dir, filepath.Base(path))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		paths = append(paths, p)
	}
	out, err := exec.Command(sa, append([]string{"verify", "--man=no"}, paths...)...).CombinedOutput()
	require.NoError(t, err, string(out))
	require.Empty(t, string(out))
}
