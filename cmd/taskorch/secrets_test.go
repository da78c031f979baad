package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/providers"
)

// runBinary runs the built taskorch command as a child process with env added to its
// environment: variables set for it alone, so tests that set them stay parallel.
func runBinary(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(taskorchBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{out: out.String(), err: errb.String(), code: code}
}

// secretEnv sets every variable that can hold a credential, each to a value of its own.
func secretEnv() (env, secrets []string) {
	add := func(name, value string) {
		env = append(env, name+"="+value)
		secrets = append(secrets, value)
	}
	add("DATABASE_URL", "postgres://u:s3cr3t-pw@127.0.0.1:1/db")
	add("TASKORCH_LISTEN_DATABASE_URL", "postgres://u:listen-s3cr3t@127.0.0.1:1/db")
	add("TASKORCH_READ_DATABASE_URL", "postgres://u:read-s3cr3t@127.0.0.1:1/db")
	add("TASKORCH_REDIS_URL", "redis://u:redis-s3cr3t@127.0.0.1:1/0")
	add("TASKORCH_SQS_QUEUE_URL", "https://u:sqs-url-s3cr3t@127.0.0.1:1/q")
	add("TASKORCH_SQS_ENDPOINT", "http://u:sqs-endpoint-s3cr3t@127.0.0.1:1")
	add(envDashboardToken, "dashboard-s3cr3t-token")
	add(envAPITokens, "app_user=api-s3cr3t-token-0123456789")
	add("AWS_SECRET_ACCESS_KEY", "aws-s3cr3t-key")
	add(envHTTPTargets, "push.x=https://u:push-s3cr3t@127.0.0.1:1/hook")
	add(envHTTPSecrets, "whsec_cHVzaC1zaWduaW5nLXMzY3IzdC1rZXk=")
	for _, name := range providers.SecretEnvNames {
		add(name, "smtp://u:"+strings.ToLower(name)+"-s3cr3t@127.0.0.1:1")
	}
	return env, secrets
}

// commandPaths lists every command of the tree, root first, as its arguments.
func commandPaths(cmd *cobra.Command, parent []string) [][]string {
	path := append(append([]string(nil), parent...), cmd.Name())
	out := [][]string{path[1:]}
	for _, c := range cmd.Commands() {
		out = append(out, commandPaths(c, path)...)
	}
	return out
}

// No command's --help shows a secret that the environment holds: flags whose variable may hold
// one default to empty and read the variable when the command runs.
func TestHelpShowsNoSecret(t *testing.T) {
	t.Parallel()
	env, secrets := secretEnv()
	paths := commandPaths(newRootCmd(), nil)
	require.Greater(t, len(paths), 20, "the walk finds every command")
	for _, p := range paths {
		r := runBinary(t, env, append(p, "--help")...)
		require.Equal(t, 0, r.code, "%v: %s", p, r.err)
		require.Contains(t, r.out, "Usage:", p)
		for _, s := range secrets {
			require.NotContains(t, r.out+r.err, s, "taskorch %s --help", strings.Join(p, " "))
		}
		require.Contains(t, r.out, "(env DATABASE_URL)", p)
	}
}

// DATABASE_URL is read from the environment when --database-url is not given, and an error
// that quotes it shows no password, in the URL form or the keyword form.
func TestDatabaseURLErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		url, want string
		code      int
	}{
		{"postgres://u:s3cr3t-pw@127.0.0.1:1/db?connect_timeout=5", "cannot reach the database at u@127.0.0.1:1/db", 1},
		{"host=127.0.0.1 port=1 user=u password=s3cr3t-pw dbname=db connect_timeout=5", "cannot reach the database at u@127.0.0.1:1/db", 1},
		{"postgres://u:s3cr3t-pw@127.0.0.1:notaport/db", "DATABASE_URL is not a valid PostgreSQL URL", 2},
		{"host=127.0.0.1 port=x password='s3cr3t-pw'", "DATABASE_URL is not a valid PostgreSQL URL", 2},
	} {
		r := runBinary(t, []string{"DATABASE_URL=" + tt.url}, "tasks", "list")
		require.Equal(t, tt.code, r.code, r.err)
		require.Contains(t, r.err, tt.want)
		require.NotContains(t, r.err, "s3cr3t-pw")
		require.Equal(t, 1, strings.Count(r.err, "taskorch: "), r.err)
	}
}

func TestRedactString(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"cannot parse `postgres://u:pw@h:5432/db`: x":           "cannot parse `postgres://u:xxxxx@h:5432/db`: x",
		"a postgresql://u:p%40w@h/db and redis://:pw2@r:6379/0": "a postgresql://u:xxxxx@h/db and redis://:xxxxx@r:6379/0",
		"host=h password=pw user=u":                             "host=h password=xxxxx user=u",
		"(host=h password='p w\\'s')":                           "(host=h password='xxxxx')",
		"cannot parse `host=h password=pw`: invalid port":       "cannot parse `host=h password=xxxxx`: invalid port",
		"nothing to hide: postgres://u@h/db":                    "nothing to hide: postgres://u@h/db",
	} {
		require.Equal(t, want, redactString(in), in)
	}
}
