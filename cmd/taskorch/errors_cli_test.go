package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// Every error is printed once, on its first line, with one "taskorch: " prefix, in words a
// user reads: no Go package names (strconv.ParseInt, time:) from the flag parser.
func TestErrorsPrintedOnceWithOnePrefix(t *testing.T) {
	t.Parallel()
	db := []string{"--database-url", dbtest.NewDBURL(t)}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"enqueue", "report", `{}`, "--priority", "abc"}, exitUsage, `invalid argument "abc" for --priority: not a whole number`},
		{[]string{"enqueue", "report", `{}`, "--priority", "1.5"}, exitUsage, `invalid argument "1.5" for --priority: not a whole number`},
		{[]string{"worker", "--lease-duration", "5"}, exitUsage, `invalid argument "5" for --lease-duration: not a duration such as 30s, 5m or 1h30m`},
		{[]string{"worker", "--history-retention", "7"}, exitUsage, `invalid argument "7" for --history-retention: not a duration such as 30s, 5m or 1h30m`},
		{[]string{"worker", "--history-retention", "a week"}, exitUsage, `invalid argument "a week" for --history-retention: not a duration such as 30s, 5m or 1h30m`},
		{[]string{"worker", "--migrate=maybe"}, exitUsage, `invalid argument "maybe" for --migrate: not true or false`},
		{[]string{"worker", "--poll-interval", "0s"}, exitUsage, "--poll-interval must be at least 1ms and --max-poll-interval at least --poll-interval, got 0s and 2s"},
		{[]string{"worker", "--poll-interval", "30s", "--max-poll-interval", "1s"}, exitUsage, "--poll-interval must be at least 1ms and --max-poll-interval at least --poll-interval, got 30s and 1s"},
		{[]string{"limits", "set", "email", "--rate", "fast"}, exitUsage, `invalid argument "fast" for --rate: not a number`},
		{[]string{"enqueue", "report", `{}`, "--at", "tomorrow"}, exitUsage, `--at "tomorrow" is not an RFC 3339 timestamp such as 2030-01-02T15:04:05Z`},
		{[]string{"tasks", "list", "--bogus"}, exitUsage, "unknown flag: --bogus (see 'taskorch tasks list --help')"},
		{[]string{"tasks", "list", "-z"}, exitUsage, "unknown shorthand flag: 'z' in -z (see 'taskorch tasks list --help')"},
		{[]string{"enqueue", "report", `{}`, "--priority"}, exitUsage, "flag needs an argument: --priority"},
		// The library's errors carry "taskorch: " themselves.
		{[]string{"enqueue", "bad type", `{}`}, exitUsage, `task type "bad type" is malformed: use 1 to 128 letters, digits, "_", ".", ":" or "-", starting with a letter`},
		{[]string{"tasks", "show", "999999"}, exitNotFound, "get task 999999: task not found"},
	} {
		r := run(t, append(append([]string{tc.args[0]}, db...), tc.args[1:]...)...)
		require.Equal(t, tc.code, r.code, "%v: %s", tc.args, r.err)
		require.Equal(t, "taskorch: "+tc.want+"\n", r.err, tc.args)
		for _, pkg := range []string{"strconv", "time:", "ParseInt", "ParseFloat", "ParseBool"} {
			require.NotContains(t, r.err, pkg, tc.args)
		}
	}
}

// A malformed TASKORCH_HISTORY_RETENTION is refused as a usage error (exit 2), like the other
// durations from the environment, before anything connects. (t.Setenv: not parallel.)
func TestWorkerEnvHistoryRetentionRefused(t *testing.T) {
	t.Setenv("TASKORCH_HISTORY_RETENTION", "7days")
	r := run(t, "worker", "--database-url", "postgres://127.0.0.1:1/none")
	require.Equal(t, exitUsage, r.code, r.err)
	require.Equal(t, 2, r.code)
	require.Equal(t, "taskorch: TASKORCH_HISTORY_RETENTION=\"7days\" is not a Go duration such as 30s or 5m\n", r.err)
}

// --warn-running-after takes a duration for every type and TYPE=DURATION entries; anything
// else is a usage error (exit 2) before anything connects, as is a type the library refuses.
func TestWorkerWarnRunningAfter(t *testing.T) {
	t.Parallel()
	all, byType, err := parseWarnRunningAfter(" 10m, comms.send_email=30s ,files.delete=-1s")
	require.NoError(t, err)
	require.Equal(t, 10*time.Minute, all)
	require.Equal(t, map[string]time.Duration{"comms.send_email": 30 * time.Second, "files.delete": -time.Second}, byType)
	all, byType, err = parseWarnRunningAfter("")
	require.NoError(t, err)
	require.Zero(t, all)
	require.Nil(t, byType)

	for _, v := range []string{"10", "email=soon", "=5s,1m"} {
		r := run(t, "worker", "--database-url", "postgres://127.0.0.1:1/none", "--warn-running-after", v)
		require.Equal(t, exitUsage, r.code, "%s: %s", v, r.err)
		require.Contains(t, r.err, "--warn-running-after:", v)
	}
}

func TestPrintError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("plain"), "taskorch: plain\n"},
		{taskorch.ErrNotFound, "taskorch: task not found\n"},
		{fmt.Errorf("enqueue: %w", taskorch.ErrInvalidInput), "taskorch: enqueue: invalid input\n"},
		{errors.Join(taskorch.ErrNotFound, taskorch.ErrWrongState), "taskorch: task not found\noperation not allowed in the task's status\n"},
	} {
		var b strings.Builder
		printError(&b, tc.err)
		require.Equal(t, tc.want, b.String())
	}
}

// taskorch enqueue refuses a payload over its bound (the Go client's default, 1 MiB), says which
// bound it hit and how to raise it; raised, the payload goes in; the database's own limit still
// refuses one over 8 MiB, with its own message.
func TestEnqueuePayloadBound(t *testing.T) {
	t.Parallel()
	db := []string{"--database-url", dbtest.NewDBURL(t)}
	payload := `{"blob":"` + strings.Repeat("x", 3<<19) + `"}` // 1.5 MiB

	r := run(t, append([]string{"enqueue", "report", payload}, db...)...)
	require.Equal(t, exitUsage, r.code, r.err)
	require.Equal(t, "taskorch: PAYLOAD is 1572875 bytes, over taskorch enqueue's limit of 1048576 bytes (1 MiB): "+
		"raise it with --max-payload-bytes; the database refuses payloads over 8 MiB whatever it is\n", r.err)

	file := filepath.Join(t.TempDir(), "tasks.jsonl")
	require.NoError(t, os.WriteFile(file, []byte("{}\n"+payload+"\n"), 0o600))
	r = run(t, append([]string{"enqueue", "report", "--file", file}, db...)...)
	require.Equal(t, exitUsage, r.code, r.err)
	require.Contains(t, r.err, "taskorch: line 2: PAYLOAD is 1572875 bytes, over taskorch enqueue's limit of 1048576 bytes (1 MiB): raise it with --max-payload-bytes")

	r = run(t, append([]string{"enqueue", "report", payload, "--max-payload-bytes", "2097152"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	r = run(t, append([]string{"enqueue", "report", "--file", file, "--max-payload-bytes", "2097152"}, db...)...)
	require.Equal(t, 0, r.code, r.err)

	huge := `{"blob":"` + strings.Repeat("y", 9<<20) + `"}`
	r = run(t, append([]string{"enqueue", "report", huge, "--max-payload-bytes", "20000000"}, db...)...)
	require.Equal(t, exitUsage, r.code, r.err)
	require.Regexp(t, `^taskorch: enqueue report: payload is \d+ bytes, over the limit of 8388608 bytes \(8 MiB\) per task\. Store large data elsewhere`, r.err)
	require.Equal(t, 1, strings.Count(r.err, "taskorch: "), r.err)
}
