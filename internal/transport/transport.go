// Package transport carries task ids from dispatchers to workers over a message system (Redis
// Streams, SQS), with PostgreSQL as the only truth (docs/transports.md).
//
// A message says "task N may be due": nothing more. Workers claim the task in the database
// before doing anything (exactly one claim wins), and acknowledge the message only after the
// task's outcome is committed. Lost, duplicated, delayed or reordered messages therefore change
// nothing that is true: a lost one is sent again by the reclaimer (Dispatcher), a duplicate or a
// late one is refused at the claim and acknowledged.
//
// The implementations live in the subpackages redisstream and sqs; Faults wraps any of them to
// inject duplicated, dropped and delayed messages in tests.
package transport

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Names of the transports, as in TASKORCH_TRANSPORT and queues.worker.transport.
const (
	Postgres = "postgres"
	Redis    = "redis"
	SQS      = "sqs"
)

// Message is one delivery of a task id.
type Message struct {
	// TaskID is the task the message is about.
	TaskID int64
	// Handle identifies this delivery to the transport: a stream entry id (Redis) or a receipt
	// handle (SQS). Acknowledging and extending use it.
	Handle string
}

// Transport sends task ids and delivers them to workers, at least once. Implementations are
// safe for concurrent use.
type Transport interface {
	// Name is the transport's name (Redis, SQS).
	Name() string

	// Send sends one message per id. On error, Failed tells which ids were not sent (all of them
	// if it says nothing): their tasks are made eligible again.
	Send(ctx context.Context, ids []int64) error

	// Receive waits for messages (Redis: XREADGROUP BLOCK, 1s by default; SQS: a long poll,
	// 10s by default; both return as soon as there is one) and returns up to n of them; none is
	// not an error. A received message stays
	// with this receiver, invisible to the others, until it is acknowledged or its hold lapses
	// (Redis: idle longer than the hold, then taken by XAUTOCLAIM; SQS: visibility timeout).
	Receive(ctx context.Context, n int) ([]Message, error)

	// Ack acknowledges messages: they are not delivered again.
	Ack(ctx context.Context, msgs []Message) error

	// Extend keeps received messages held by this receiver for another hold period (a task
	// running longer than its lease's renewal interval).
	Extend(ctx context.Context, msgs []Message) error

	// Ping checks that the transport answers (and sets up what it needs: a consumer group).
	Ping(ctx context.Context) error

	// Close releases the transport's connections.
	Close() error
}

// SendError reports the ids a Send could not send.
type SendError struct {
	Failed []int64
	Err    error
}

func (e *SendError) Error() string {
	return "transport: " + strconv.Itoa(len(e.Failed)) + " message(s) not sent: " + e.Err.Error()
}

func (e *SendError) Unwrap() error { return e.Err }

// Failed returns the ids err says were not sent, or all of ids when it does not say.
func Failed(err error, ids []int64) []int64 {
	var se *SendError
	if errors.As(err, &se) {
		return se.Failed
	}
	return ids
}

// EncodeID is a message body: the task id in decimal.
func EncodeID(id int64) string { return strconv.FormatInt(id, 10) }

// DecodeID parses a message body made by EncodeID.
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

// HoldFor is how long a received message stays held before the transport gives it to another
// receiver: the lease duration plus a margin, so that a redelivery after a worker died finds the
// task's lease expired (and the claim rescues it) rather than still running.
func HoldFor(lease time.Duration) time.Duration {
	return lease + max(lease/10, 2*time.Second)
}
