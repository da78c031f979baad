package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// A Go handler's context carries the worker's pool, for what runs under the task's lease in
// the handler's own statements: a durable workflow's checkpoints and its transactional steps
// (docs/workflows.md, "Durable workflows in Go").

type handlerDBKey struct{}

// withHandlerDB returns ctx carrying the worker's pool.
func withHandlerDB(ctx context.Context, pool *pgxpool.Pool) context.Context {
	return context.WithValue(ctx, handlerDBKey{}, pool)
}

// HandlerDBFrom returns the pool of the worker running the Go handler whose context ctx is; nil
// when ctx is not a handler's.
func HandlerDBFrom(ctx context.Context) *pgxpool.Pool {
	p, _ := ctx.Value(handlerDBKey{}).(*pgxpool.Pool)
	return p
}

// ErrSuspendedInDatabase is returned by a Go handler whose own lease-fenced statement already put
// its task back to pending (a durable workflow's wait for a signal registers the wait and snoozes
// the task in one transaction): the outcome is written, and the worker writes nothing more.
var ErrSuspendedInDatabase = errors.New("the task was suspended by the handler's own statement")

// ErrWaitingInDatabase is ErrSuspendedInDatabase for a task its handler's statement made wait
// for other tasks (a durable workflow's Await): its status is waiting.
var ErrWaitingInDatabase = fmt.Errorf("%w: it waits for other tasks", ErrSuspendedInDatabase)
