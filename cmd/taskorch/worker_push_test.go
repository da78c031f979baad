package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A bad push setting stops `taskorch worker` at start (exit 2), before it touches the database,
// with a message naming the setting; neither the secret nor the URL's password is printed.
func TestWorkerPushConfigErrors(t *testing.T) {
	t.Parallel()
	noDB := "DATABASE_URL=postgres://taskorch@127.0.0.1:1/none"
	const secret = "whsec_cHVzaC1jb25maWctczNjcjN0LWtleS0xMjM0NQ=="
	const short = "whsec_c2hvcnQ="
	withSecret := envHTTPSecrets + "=" + secret
	for _, tt := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{withSecret}, []string{"--http-target", "push.a"}, `--http-target: "push.a" is not TYPE=URL`},
		{[]string{withSecret}, []string{"--http-target", "push.a=ftp://u:hunter2pw@h/x"}, `--http-target: the URL of "push.a" must start with https:// or http://, got "ftp://h/x"`},
		{[]string{withSecret}, []string{"--http-target", "push.a=http:///x"}, `--http-target: the URL of "push.a" has no host`},
		{[]string{withSecret}, []string{"--http-target", "push.a=http://h/x#frag"}, `the URL of "push.a" must not have a fragment`},
		{[]string{withSecret}, []string{"--http-target", "push.a=http://h:99999/x"}, `the URL of "push.a" has a bad port "99999"`},
		{[]string{withSecret}, []string{"--http-target", "push.a=http://h/1", "--http-target", "push.a=http://h/2"}, `--http-target: task type "push.a" is given twice`},
		{[]string{withSecret, envHTTPTargets + "=push.a=http://h/1,push.a=http://h/2"}, nil, envHTTPTargets + `: task type "push.a" is given twice`},
		{[]string{withSecret}, []string{"--http-target", "bad type!=http://h/"}, `--http-target: "bad type!"`},
		{[]string{withSecret}, []string{"--http-target", "email=http://h/"}, `--http-target: task type "email" is built in`},
		{[]string{withSecret}, []string{"--http-target", "db_function=http://h/"}, `--http-target: task type "db_function" is built in`},
		{[]string{withSecret}, []string{"--http-target", "taskorch.noop=http://h/"}, `--http-target: task type "taskorch.noop" has a handler built into the worker already`},
		{nil, []string{"--http-target", "push.a=https://u:hunter2pw@h/x"}, envHTTPSecrets + " is not set: push targets need a signing secret"},
		{[]string{envHTTPTargets + "=push.a=https://h/x"}, nil, envHTTPSecrets + " is not set"},
		{[]string{envHTTPSecrets + "=hunter2plain"}, []string{"--http-target", "push.a=http://h/"}, envHTTPSecrets + ": secret 1 does not start with whsec_"},
		{[]string{envHTTPSecrets + "=" + secret + ",whsec_hunter2!!"}, []string{"--http-target", "push.a=http://h/"}, envHTTPSecrets + ": secret 2 is not whsec_ and standard base64"},
		{[]string{envHTTPSecrets + "=" + short}, []string{"--http-target", "push.a=http://h/"}, envHTTPSecrets + ": secret 1 is a key of 5 bytes; at least 16 are needed"},
		{[]string{withSecret}, []string{"--http-target", "push.a=http://h/", "--http-timeout", "0s"}, "--http-timeout (TASKORCH_HTTP_TIMEOUT) must be positive"},
	} {
		r := runBinary(t, append([]string{noDB}, tt.env...), append([]string{"worker"}, tt.args...)...)
		require.Equal(t, 2, r.code, "%v %v: %s", tt.env, tt.args, r.err)
		require.Contains(t, r.err, tt.want, "%v %v", tt.env, tt.args)
		for _, s := range []string{"hunter2", strings.TrimPrefix(secret, "whsec_"), strings.TrimPrefix(short, "whsec_")} {
			require.NotContains(t, r.err+r.out, s, "%v %v", tt.env, tt.args)
		}
		require.NotContains(t, r.err, "cannot reach the database", "refused before connecting")
	}
}
