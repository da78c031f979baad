package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Bad transport settings are usage errors (exit 2), reported before connecting to anything,
// with messages that name the setting and never quote a Redis password.
func TestWorkerTransportFlags(t *testing.T) {
	// Not parallel: the Redis URL falls back to the environment.
	t.Setenv("TASKORCH_REDIS_URL", "")
	t.Setenv("TASKORCH_SQS_QUEUE_URL", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--transport", "kafka"}, `transport "kafka": want postgres, redis or sqs`},
		{[]string{"--transport", "redis"}, "--transport redis needs --redis-url or TASKORCH_REDIS_URL"},
		{[]string{"--transport", "redis", "--redis-url", "http://x"}, "redis URL (want redis://[user:password@]host:port[/db])"},
		{[]string{"--transport", "redis", "--redis-url", "redis://u:s3cret@host:port/0"}, "redis URL"},
		{[]string{"--transport", "sqs"}, "--transport sqs needs --sqs-queue-url or TASKORCH_SQS_QUEUE_URL"},
		{[]string{"--transport", "sqs", "--sqs-queue-url", "queue"}, `SQS queue URL "queue": want http(s)://host/ACCOUNT/NAME`},
	} {
		r := run(t, append([]string{"worker", "--database-url", "postgres://127.0.0.1:1/none"}, tc.args...)...)
		require.Equal(t, exitUsage, r.code, "%v: %s", tc.args, r.err)
		require.Contains(t, r.err, tc.want, tc.args)
		require.NotContains(t, r.err, "s3cret", "the password is not quoted")
	}

	t.Setenv("TASKORCH_REDIS_URL", "redis://:s3cret@host/x")
	r := run(t, "worker", "--transport", "redis", "--database-url", "postgres://127.0.0.1:1/none")
	require.Equal(t, exitUsage, r.code, r.err)
	require.Contains(t, r.err, "redis URL")
	require.NotContains(t, r.err, "s3cret")
}
