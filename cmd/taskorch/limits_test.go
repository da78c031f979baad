package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// limits set, list and remove, and their bad input: a clear message, a non-zero exit code and
// nothing written.
func TestLimitsCommands(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	db := []string{"--database-url", url}

	r := run(t, append([]string{"limits", "set", "email", "--rate", "2"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Equal(t, "email: 2/s (burst 1)\n", r.out)
	r = run(t, append([]string{"limits", "set", "report.build", "--max-running", "4", "--key", "tenant"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Equal(t, "report.build: at most 4 running per tenant\n", r.out)
	for _, p := range []string{`{"tenant": "a"}`, `{"tenant": "a"}`, `{"tenant": "b"}`, `{}`} {
		require.Equal(t, 0, run(t, append([]string{"enqueue", "report.build", p}, db...)...).code)
	}

	r = run(t, append([]string{"limits", "list"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	require.Len(t, lines, 5, r.out)
	require.Regexp(t, `^TASK TYPE\s+LIMIT\s+KEY\s+RUNNING\s+HELD\s+TOKENS$`, lines[0])
	require.Regexp(t, `^email\s+2/s \(burst 1\)\s+-\s+0\s+0\s+1.0$`, lines[1])
	require.Regexp(t, `^report.build\s+at most 4 running per tenant\s+a\s+0\s+2\s+-$`, lines[2])
	require.Regexp(t, `^report.build\s+at most 4 running per tenant\s+b\s+0\s+1\s+-$`, lines[3])
	require.Regexp(t, `^report.build\s+at most 4 running per tenant\s+\(no key\)\s+0\s+1\s+-$`, lines[4])

	usage := runJSON[[]map[string]any](t, append([]string{"limits", "list"}, db...)...)
	require.Len(t, usage, 4)
	require.Equal(t, "email", usage[0]["task_type"])
	require.InDelta(t, 2.0, usage[0]["rate_per_second"], 0)

	r = run(t, append([]string{"limits", "remove", "email"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Equal(t, "email: no limit\n", r.out)

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"limits", "remove", "email"}, exitNotFound, `task type "email" has no limit`},
		{[]string{"limits", "set", "email"}, exitUsage, "give --max-running, --rate or both"},
		{[]string{"limits", "set", "email", "--max-running", "-1"}, exitUsage, "--max-running must be at least 1, got -1"},
		// 0 is a value given, not a missing flag: refused as queues.set_limit refuses it, saying what to do instead.
		{[]string{"limits", "set", "email", "--max-running", "0"}, exitUsage,
			"limits set email: --max-running must be at least 1, got 0 (to stop email from being claimed, pause it: taskorch queues pause email; to lift its limit: taskorch limits remove email)"},
		{[]string{"limits", "set", "email", "--rate", "0"}, exitUsage, "--rate must be above 0 and at most 1000000 claims per second, got 0"},
		{[]string{"limits", "set", "email", "--rate", "NaN"}, exitUsage, "--rate must be above 0 and at most 1000000 claims per second, got NaN"},
		{[]string{"limits", "set", "email", "--rate", "2000000"}, exitUsage, "got 2e+06"},
		{[]string{"limits", "set", "email", "--rate", "1", "--burst", "0"}, exitUsage, "--burst must be between 1 and 1000000, got 0"},
		{[]string{"limits", "set", "email", "--max-running", "0", "--rate", "1"}, exitUsage, "--max-running must be at least 1, got 0"},
		{[]string{"limits", "set", "email", "--rate", "abc"}, exitUsage, `invalid argument "abc"`},
		{[]string{"limits", "set", "email", "--max-running", "2", "--burst", "3"}, exitUsage, "_burst needs _rate_per_second"},
		{[]string{"limits", "set", "email", "--rate", "1", "--key", "a.b"}, exitUsage, "is not a plain identifier"},
		{[]string{"limits", "set", "bad type", "--rate", "1"}, exitUsage, "is not valid"},
	} {
		r := run(t, append(tc.args, db...)...)
		require.Equal(t, tc.code, r.code, "%v: %s", tc.args, r.err)
		require.Contains(t, r.err, tc.want, tc.args)
	}
	usage = runJSON[[]map[string]any](t, append([]string{"limits", "list"}, db...)...)
	require.Len(t, usage, 3, "only report.build's buckets: nothing else was written")
}

// TASKORCH_EMAIL_RATE and TASKORCH_SMS_RATE set the channels' rate limits at start, keeping the
// rest of a limit set otherwise; a value that is not a number stops the worker with a clear
// error before it does anything.
func TestWorkerChannelRates(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	require.Equal(t, 0, run(t, "migrate", "up", "--database-url", url).code)
	require.Equal(t, 0, run(t, "limits", "set", "sms", "--max-running", "3", "--database-url", url).code)
	startWorkerProc(t, url, "TASKORCH_EMAIL_RATE=2", "TASKORCH_SMS_RATE=0.5")
	waitFor(t, pool, "the limits set", `select count(*) = 2 from queues.task_limit where rate_per_second is not null`)
	require.Equal(t, 2.0, q[float64](t, pool, `select rate_per_second from queues.task_limit where task_type = 'email'`))
	require.Equal(t, "0.5 3", q[string](t, pool, `select rate_per_second || ' ' || max_running from queues.task_limit where task_type = 'sms'`))

	bad := startWorkerProc(t, url, "TASKORCH_EMAIL_RATE=fast")
	require.Equal(t, exitUsage, bad.wait(t))
	require.Contains(t, bad.out.String(), `TASKORCH_EMAIL_RATE="fast" is not a number`)
}
