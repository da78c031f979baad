package taskorch

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrClientClosed is the error of every call on a Client after its Close.
var ErrClientClosed = errors.New("taskorch: the client is closed")

// DBTX is what the client runs statements on: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ClientConfig configures a Client. The zero value is valid.
type ClientConfig struct {
	// MaxPayloadBytes bounds the JSON size of one task's payload; Enqueue refuses a larger one
	// with ErrInvalidInput before sending it. Defaults to 1 MiB. Negative means no bound.
	//
	// It is a guard for the program, stricter than the database's hard limit of 8 MiB per task,
	// which holds whatever this is (docs/sql.md, "Payload size"): raise it up to 8 MiB for a
	// program that means to send large payloads.
	MaxPayloadBytes int

	// TraceContext, when set, returns the W3C trace context ("traceparent", and "tracestate"
	// when there is one) of the trace in an enqueuing context; each payload that does not carry
	// a "traceparent" gets them, so a worker's task span links back to the trace that enqueued
	// it. contrib/otel's TraceContext reads OpenTelemetry's span (ClientConfig{TraceContext:
	// taskorchotel.TraceContext}). Nil by default: payloads are sent as given.
	TraceContext func(ctx context.Context) (traceparent, tracestate string)
}

const defaultMaxPayloadBytes = 1 << 20

func (c *ClientConfig) withDefaults() ClientConfig {
	out := ClientConfig{}
	if c != nil {
		out = *c
	}
	if out.MaxPayloadBytes == 0 {
		out.MaxPayloadBytes = defaultMaxPayloadBytes
	}
	return out
}

// Client enqueues and manages tasks and schedules. It is safe for concurrent use. Every write
// and every read has a ...Tx twin that runs in the caller's transaction, so a task commits or
// rolls back together with the application's own rows, and a read sees the transaction's own
// uncommitted writes.
//
// The pool is the caller's: the client never closes it. What the client opens itself (the
// LISTEN connection Wait takes out of the pool) is closed by Close, which a program calls
// before it closes the pool.
type Client struct {
	pool   *pgxpool.Pool
	cfg    ClientConfig
	waits  *waitHub // Wait's shared LISTEN connection
	closed atomic.Bool
}

// NewClient returns a client over pool. cfg may be nil for the defaults. The database must be
// migrated (see Migrate).
func NewClient(pool *pgxpool.Pool, cfg *ClientConfig) (*Client, error) {
	if pool == nil {
		return nil, errors.New("taskorch: NewClient needs a *pgxpool.Pool")
	}
	return &Client{pool: pool, cfg: cfg.withDefaults(), waits: newWaitHub(pool)}, nil
}

// Pool returns the pool the client was made with.
func (c *Client) Pool() *pgxpool.Pool { return c.pool }

// Close releases what the client opened itself: it ends the Waits in progress (they return
// ErrClientClosed) and closes Wait's LISTEN connection, and returns once that connection is
// closed and the goroutine that held it has ended. It does not close the pool, which is the
// caller's: close the pool after the client. Every later call on the client returns an error
// matching ErrClientClosed. Calling Close again does nothing and returns nil.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.waits.close()
	return nil
}

// checkOpen returns ErrClientClosed once Close was called.
func (c *Client) checkOpen() error {
	if c.closed.Load() {
		return ErrClientClosed
	}
	return nil
}
