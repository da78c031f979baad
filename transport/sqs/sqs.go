// Package sqs is the Amazon SQS transport of taskorch workers, over the AWS SDK for Go v2 (see
// package transport for the contract, docs/transports.md for how it compares).
//
// Task ids are message bodies, sent in batches of ten (SendMessageBatch), received by long
// polling in batches of up to ten, held by a visibility timeout aligned with the task's lease
// (the hold the worker gives at Open), and deleted (DeleteMessageBatch) once the task's outcome
// is committed.
//
//	tr, err := sqs.New(ctx, sqs.Config{QueueURL: os.Getenv("SQS_QUEUE_URL")})
//	if err != nil {
//		return err // a malformed queue URL, or the AWS configuration does not load
//	}
//	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{Transport: tr, Handlers: hs})
//
// Verified against the local server in internal/testing/sqstest (the JSON protocol subset taskorch
// uses), not against AWS.
package sqs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/taskorch/taskorch/transport"
)

// Name is the transport's name (Transport.Name), as in TASKORCH_TRANSPORT.
const Name = "sqs"

// Defaults and bounds of Config.
const (
	DefaultWait = 10 * time.Second
	// DefaultHold is the visibility timeout of received messages until Open sets the hold.
	DefaultHold   = 5 * time.Minute
	maxBatch      = 10               // SQS's batch limit
	maxVisibility = 12 * time.Hour   // SQS's visibility timeout limit
	maxWait       = 20 * time.Second // SQS's long poll limit
	parallelCalls = 8                // batch calls in flight at once for one Send/Ack
)

// Config configures a Transport. Only QueueURL is required.
type Config struct {
	// QueueURL is the queue's URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME).
	QueueURL string
	// Endpoint overrides the SQS endpoint (a local server, LocalStack, a VPC endpoint).
	// Defaults to AWS's endpoint for the region.
	Endpoint string
	// Region is the AWS region. Defaults to the SDK's configuration (AWS_REGION, the shared
	// config), else the queue URL's region, else us-east-1.
	Region string
	// Credentials sign requests. Defaults to the SDK's default chain (environment, shared
	// files, SSO, container and instance roles).
	Credentials aws.CredentialsProvider
	// Wait is the long poll of one ReceiveMessage (at most 20 seconds). Defaults to DefaultWait.
	Wait time.Duration
}

// Transport is the SQS transport. Make it with New; a worker opens it (Open) with the hold
// its lease needs, the visibility timeout of the messages it receives.
type Transport struct {
	cfg       Config
	client    *awssqs.Client
	queueName string
	owner     string

	mu     sync.Mutex
	opened string        // the consumer that opened it
	hold   time.Duration // visibility timeout of received messages (whole seconds, at most 12h)
}

var _ transport.Transport = (*Transport)(nil)

// parseQueueURL checks a queue URL and returns the queue's name and owner account (the last two
// path segments; the owner may be empty). Its errors quote the URL with any password redacted.
func parseQueueURL(raw string) (name, owner string, err error) {
	if raw == "" {
		return "", "", errors.New("the sqs transport needs a queue URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", errors.New("SQS queue URL: want http(s)://host/ACCOUNT/NAME") // url's error would quote it
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", "", fmt.Errorf("SQS queue URL %q: want http(s)://host/ACCOUNT/NAME", u.Redacted())
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	name = parts[len(parts)-1]
	if name == "" {
		return "", "", fmt.Errorf("SQS queue URL %q has no queue name", u.Redacted())
	}
	if len(parts) >= 2 {
		owner = parts[len(parts)-2]
	}
	return name, owner, nil
}

// regionOf guesses the region from an AWS queue URL host (sqs.REGION.amazonaws.com).
func regionOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	labels := strings.Split(u.Hostname(), ".")
	if len(labels) >= 4 && labels[0] == "sqs" && labels[2] == "amazonaws" {
		return labels[1]
	}
	return ""
}

// New returns a Transport for cfg, or an error when cfg.QueueURL is empty or malformed or the
// SDK's configuration does not load. It loads the configuration (region, credentials) but
// does not call SQS: Ping does.
func New(ctx context.Context, cfg Config) (*Transport, error) {
	name, owner, err := parseQueueURL(cfg.QueueURL)
	if err != nil {
		return nil, err
	}
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultWait
	}
	cfg.Wait = min(cfg.Wait, maxWait)

	var opts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(cfg.Credentials))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("SQS: loading the AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = regionOf(cfg.QueueURL)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	client := awssqs.NewFromConfig(awsCfg, func(o *awssqs.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		// Fail fast when SQS is away, so the worker falls back to PostgreSQL quickly.
		o.RetryMaxAttempts = 2
	})
	return &Transport{cfg: cfg, client: client, queueName: name, owner: owner, hold: DefaultHold}, nil
}

// Name returns Name.
func (*Transport) Name() string { return Name }

// String returns Name.
func (*Transport) String() string { return Name }

// LogValue logs a Transport as its name.
func (*Transport) LogValue() slog.Value { return slog.StringValue(Name) }

// Open sets the hold, the visibility timeout of the messages Receive returns and Extend
// extends (rounded up to whole seconds, at most 12 hours). SQS has no consumer names: opts.Consumer
// only tells who opened the transport. It does not call SQS.
func (t *Transport) Open(_ context.Context, opts transport.OpenOptions) error {
	if opts.Hold <= 0 {
		return fmt.Errorf("sqs: Open needs a positive hold, got %s", opts.Hold)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.opened != "" {
		return fmt.Errorf("sqs: the transport is already open for consumer %q (a transport serves one worker)", t.opened)
	}
	t.opened = cmp.Or(opts.Consumer, "(unnamed)")
	t.hold = min(opts.Hold, maxVisibility)
	return nil
}

// Close does nothing: the SDK's HTTP client needs no closing.
func (*Transport) Close() error { return nil }

// Ping asks SQS for the queue's URL (GetQueueUrl).
func (t *Transport) Ping(ctx context.Context) error {
	in := &awssqs.GetQueueUrlInput{QueueName: aws.String(t.queueName)}
	if t.owner != "" && isAccountID(t.owner) {
		in.QueueOwnerAWSAccountId = aws.String(t.owner)
	}
	_, err := t.client.GetQueueUrl(ctx, in)
	return err
}

func isAccountID(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil && len(s) == 12
}

// Send sends one message per id, in batches of ten, several batches at once.
func (t *Transport) Send(ctx context.Context, ids []int64) error {
	var mu sync.Mutex
	var failed []int64
	var firstErr error
	fail := func(ids []int64, err error) {
		mu.Lock()
		defer mu.Unlock()
		failed = append(failed, ids...)
		if firstErr == nil {
			firstErr = err
		}
	}
	inBatches(len(ids), func(lo, hi int) {
		chunk := ids[lo:hi]
		entries := make([]types.SendMessageBatchRequestEntry, len(chunk))
		for i, id := range chunk {
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(transport.EncodeID(id))}
		}
		out, err := t.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: aws.String(t.cfg.QueueURL), Entries: entries})
		if err != nil {
			fail(chunk, err)
			return
		}
		var bad []int64
		for _, f := range out.Failed {
			if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil && i >= 0 && i < len(chunk) {
				bad = append(bad, chunk[i])
			}
		}
		if len(bad) > 0 {
			fail(bad, fmt.Errorf("SendMessageBatch: %s: %s", aws.ToString(out.Failed[0].Code), aws.ToString(out.Failed[0].Message)))
		}
	})
	if len(failed) > 0 {
		return &transport.SendError{Failed: failed, Err: firstErr}
	}
	return nil
}

// Receive long-polls for up to min(max, 10) messages, holding them for the visibility timeout.
func (t *Transport) Receive(ctx context.Context, n int) ([]transport.Message, error) {
	out, err := t.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
		QueueUrl:            aws.String(t.cfg.QueueURL),
		MaxNumberOfMessages: int32(min(max(n, 1), maxBatch)), //nolint:gosec // at most 10
		WaitTimeSeconds:     int32(t.cfg.Wait / time.Second), //nolint:gosec // at most 20
		VisibilityTimeout:   t.visibility(),
	})
	if err != nil {
		return nil, err
	}
	msgs := make([]transport.Message, 0, len(out.Messages))
	var bad []transport.Message
	for _, m := range out.Messages {
		id, err := transport.DecodeID(aws.ToString(m.Body))
		if err != nil {
			bad = append(bad, transport.Message{Handle: aws.ToString(m.ReceiptHandle)})
			continue
		}
		msgs = append(msgs, transport.Message{TaskID: id, Handle: aws.ToString(m.ReceiptHandle)})
	}
	if len(bad) > 0 {
		_ = t.Ack(ctx, bad) // not a task id: nothing will ever claim it
	}
	return msgs, nil
}

func (t *Transport) visibility() int32 {
	t.mu.Lock()
	hold := t.hold
	t.mu.Unlock()
	secs := (hold + time.Second - 1) / time.Second
	return int32(secs) //nolint:gosec // at most 43200
}

// Ack deletes messages, in batches of ten.
func (t *Transport) Ack(ctx context.Context, msgs []transport.Message) error {
	return t.perBatch(msgs, func(chunk []transport.Message) error {
		entries := make([]types.DeleteMessageBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(m.Handle)}
		}
		out, err := t.client.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(t.cfg.QueueURL), Entries: entries})
		if err == nil && len(out.Failed) > 0 {
			err = fmt.Errorf("DeleteMessageBatch: %d failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Code))
		}
		return err
	})
}

// Extend sets the visibility timeout of held messages to the hold again.
func (t *Transport) Extend(ctx context.Context, msgs []transport.Message) error {
	vis := t.visibility()
	return t.perBatch(msgs, func(chunk []transport.Message) error {
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(m.Handle), VisibilityTimeout: vis}
		}
		out, err := t.client.ChangeMessageVisibilityBatch(ctx, &awssqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(t.cfg.QueueURL), Entries: entries})
		if err == nil && len(out.Failed) > 0 {
			err = fmt.Errorf("ChangeMessageVisibilityBatch: %d failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Code))
		}
		return err
	})
}

func (t *Transport) perBatch(msgs []transport.Message, call func([]transport.Message) error) error {
	var mu sync.Mutex
	var errs []error
	inBatches(len(msgs), func(lo, hi int) {
		if err := call(msgs[lo:hi]); err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	})
	return errors.Join(errs...)
}

// inBatches calls fn for each batch of at most ten of n items, up to parallelCalls at once.
func inBatches(n int, fn func(lo, hi int)) {
	if n <= maxBatch {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	sem := make(chan struct{}, parallelCalls)
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += maxBatch {
		hi := min(lo+maxBatch, n)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(lo, hi)
		})
	}
	wg.Wait()
}
