// Package transport defines how a taskorch worker receives the ids of due tasks from a message
// system instead of polling PostgreSQL for them, and what an implementation of one must do. The
// implementations are in their own packages, so that a program links only the client it uses:
// transport/redisstream (Redis Streams) and transport/sqs (Amazon SQS). docs/transports.md
// compares them.
//
// A worker without a transport (WorkerConfig.Transport nil, the default) claims due tasks from
// PostgreSQL, woken by LISTEN/NOTIFY and polling. A worker with one receives task ids from it
// and also dispatches: it marks due tasks as dispatched in the database and sends their ids, as
// every worker on the transport does (no leader is needed).
//
// # Contract
//
// A message says "task N may be due", nothing more; PostgreSQL decides everything else.
//
//   - Delivery is at least once, in no particular order. Lost, duplicated, delayed and
//     reordered messages change nothing that is true: the worker claims a received task in the
//     database before anything runs (exactly one claim wins), so a duplicate or a late message is
//     refused there and acknowledged, and a lost one is sent again by the worker's reclaimer
//     (WorkerConfig.RedispatchAfter).
//   - A received message stays with its receiver, invisible to the others, until it is
//     acknowledged or its hold (OpenOptions.Hold) lapses without an Extend; then the transport
//     delivers it again, to any receiver.
//   - The worker acknowledges a message only after the task's outcome is committed, or after its
//     claim was refused. A worker that dies leaves its messages unacknowledged: they come back
//     after the hold, and the claim rescues the task once its lease has expired. While a task
//     runs, the worker extends the hold of its message as it renews the task's lease.
//   - When the transport fails (an error from Ping, Send or Receive) the worker claims from
//     PostgreSQL and pings the transport until it answers again: an outage slows delivery down
//     to polling, it never stops work nor loses a task.
//
// # Lifecycle
//
// Make a transport with its package's constructor (redisstream.New, sqs.New), which checks the
// configuration without connecting, and give it to one worker as WorkerConfig.Transport. The
// worker owns it from then on: Run calls Open once, then Ping, uses it until it stops, and
// calls Close before it returns.
//
// The settings that depend on the worker are given at Open rather than to the constructor: the
// consumer name is the worker's id, which the worker may have generated, and the hold must
// outlast the worker's lease (see OpenOptions.Hold). Passing them from the worker keeps them
// right by construction, whoever built the transport.
package transport

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"
)

// Message is one delivery of a task id.
type Message struct {
	// TaskID is the task the message is about.
	TaskID int64
	// Handle identifies this delivery to the transport that made it (a Redis stream entry id,
	// an SQS receipt handle); Ack and Extend use it.
	Handle string
}

// OpenOptions are what a worker tells its transport at Open.
type OpenOptions struct {
	// Consumer names the receiver among those of the transport: the worker's id
	// (WorkerConfig.ID), unique in the fleet.
	Consumer string

	// Hold is how long a received message stays with this receiver, neither acknowledged nor
	// extended, before the transport delivers it again. The worker gives its lease duration plus
	// a margin (a tenth of it, at least 2s), so that a message delivered again because its
	// receiver died finds the task's lease expired, and the claim rescues the task rather than
	// refusing it.
	Hold time.Duration

	// Logger receives what the transport does on its own (taking messages over from a dead
	// receiver, trimming, dropping malformed messages). It carries the worker's id.
	Logger *slog.Logger
}

// Transport sends task ids and delivers them to workers, at least once (see the package
// documentation for the contract). Implementations are safe for concurrent use: a worker's
// fetcher, dispatcher, acknowledger and extender call them at once.
type Transport interface {
	// Name identifies the transport in queues.worker, in the transport label of the
	// taskorch_transport_* metrics and in logs ("redis", "sqs"). The workers of one name share
	// flow control: the dispatch window is computed over the live workers of that name. It is
	// not empty, and not "postgres", the name of a worker without a transport.
	Name() string

	// Open prepares the transport for one worker, before any other method but Name is called.
	// It should not wait for the service to answer (Ping does): an error stops the worker's Run,
	// whereas an unreachable transport only makes the worker fall back to PostgreSQL. A
	// transport serves one worker: opening it a second time is an error.
	Open(ctx context.Context, opts OpenOptions) error

	// Ping checks that the transport answers, and sets up what it needs (a consumer group). The
	// worker pings at start and, while the transport is down, until it answers again.
	Ping(ctx context.Context) error

	// Send sends one message per id. On error, a *SendError may tell which ids were not sent
	// (all of them when it does not say): the worker makes their tasks eligible again.
	Send(ctx context.Context, ids []int64) error

	// Receive waits a while for messages (returning as soon as there is one, or when ctx is
	// done) and returns up to n of them, each held by this receiver until acknowledged or until
	// its hold lapses. None is not an error.
	Receive(ctx context.Context, n int) ([]Message, error)

	// Ack acknowledges received messages: they are not delivered again.
	Ack(ctx context.Context, msgs []Message) error

	// Extend keeps received messages with this receiver for another hold from now (their task
	// is still running).
	Extend(ctx context.Context, msgs []Message) error

	// Close releases the transport's connections. The worker calls it when Run returns.
	Close() error
}

// SendError is the error of a Send that sent some of its ids and not others.
type SendError struct {
	// Failed are the ids not sent.
	Failed []int64
	// Err is why.
	Err error
}

// Error says how many ids were not sent, and why.
func (e *SendError) Error() string {
	return "transport: " + strconv.Itoa(len(e.Failed)) + " message(s) not sent: " + e.Err.Error()
}

// Unwrap returns Err.
func (e *SendError) Unwrap() error { return e.Err }

// Failed returns the ids a Send's err says were not sent: a *SendError's Failed, else all of
// ids.
func Failed(err error, ids []int64) []int64 {
	var se *SendError
	if errors.As(err, &se) {
		return se.Failed
	}
	return ids
}

// EncodeID makes the message body redisstream and sqs send: the task id in decimal.
func EncodeID(id int64) string { return strconv.FormatInt(id, 10) }

// DecodeID parses a message body made by EncodeID. Its error quotes at most 64 bytes of s.
func DecodeID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, errors.New("transport: message body is not a task id: " + strconv.Quote(truncate(s, 64)))
	}
	return id, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
