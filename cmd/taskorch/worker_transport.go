package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/taskorch/taskorch/transport"
	"github.com/taskorch/taskorch/transport/redisstream"
	"github.com/taskorch/taskorch/transport/sqs"
)

// The values of --transport (TASKORCH_TRANSPORT).
const (
	transportPostgres = "postgres"
	transportRedis    = redisstream.Name
	transportSQS      = sqs.Name
)

// transportFlags are the settings of the worker's transport (docs/transports.md); --transport
// itself (TASKORCH_TRANSPORT) is in worker.go. The URLs' flags default to empty, not to their
// variables' values (--help prints defaults, and a URL may carry credentials); an unset flag
// falls back to its variable in check.
type transportFlags struct {
	redisURL        string
	sqsQueueURL     string
	sqsEndpoint     string
	redispatchAfter time.Duration

	envErr error // a variable that does not parse, reported when the worker starts
}

func addTransportFlags(fs *pflag.FlagSet) *transportFlags {
	t := &transportFlags{}
	redispatch := 30 * time.Second
	if v := os.Getenv("TASKORCH_REDISPATCH_AFTER"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.envErr = fmt.Errorf("TASKORCH_REDISPATCH_AFTER=%q is not a Go duration such as 30s or 1m", v)
		}
		redispatch = d
	}
	fs.StringVar(&t.redisURL, "redis-url", "", "Redis URL for --transport redis: redis://[user:password@]host:port[/db] (env TASKORCH_REDIS_URL)")
	fs.StringVar(&t.sqsQueueURL, "sqs-queue-url", "", "SQS queue URL for --transport sqs (env TASKORCH_SQS_QUEUE_URL)")
	fs.StringVar(&t.sqsEndpoint, "sqs-endpoint", "", "SQS endpoint override: a local server, LocalStack, a VPC endpoint; default AWS's (env TASKORCH_SQS_ENDPOINT)")
	fs.DurationVar(&t.redispatchAfter, "redispatch-after", redispatch, "with redis or sqs: send a task's id again when it was dispatched and not claimed within this long (env TASKORCH_REDISPATCH_AFTER)")
	return t
}

// check validates the transport settings for name (a usage error, exit 2, when wrong).
func (t *transportFlags) check(name string) error {
	if t.envErr != nil {
		return &usageError{err: t.envErr}
	}
	if t.redisURL == "" {
		t.redisURL = os.Getenv("TASKORCH_REDIS_URL")
	}
	if t.sqsQueueURL == "" {
		t.sqsQueueURL = os.Getenv("TASKORCH_SQS_QUEUE_URL")
	}
	if t.sqsEndpoint == "" {
		t.sqsEndpoint = os.Getenv("TASKORCH_SQS_ENDPOINT")
	}
	switch name {
	case transportPostgres:
	case transportRedis:
		if t.redisURL == "" {
			return usageErrorf("--transport redis needs --redis-url or TASKORCH_REDIS_URL")
		}
	case transportSQS:
		if t.sqsQueueURL == "" {
			return usageErrorf("--transport sqs needs --sqs-queue-url or TASKORCH_SQS_QUEUE_URL")
		}
	default:
		return usageErrorf("transport %q: want postgres, redis or sqs", name)
	}
	return nil
}

// build checks the settings for name and makes its transport: nil for postgres (the worker
// claims from PostgreSQL). A malformed URL is a usage error (exit 2) that never quotes a Redis
// password; so is an AWS configuration that does not load. It connects to nothing.
func (t *transportFlags) build(ctx context.Context, name string) (transport.Transport, error) {
	if err := t.check(name); err != nil {
		return nil, err
	}
	switch name {
	case transportRedis:
		tr, err := redisstream.New(redisstream.Config{URL: t.redisURL})
		if err != nil {
			return nil, &usageError{err: err}
		}
		return tr, nil
	case transportSQS:
		tr, err := sqs.New(ctx, sqs.Config{QueueURL: t.sqsQueueURL, Endpoint: t.sqsEndpoint})
		if err != nil {
			return nil, &usageError{err: err}
		}
		return tr, nil
	}
	return nil, nil
}
