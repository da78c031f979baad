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

// handlerDB is what a handler's context carries of its worker.
type handlerDB struct {
	pool        *pgxpool.Pool
	checkpoints *Checkpoints
}

// withHandlerDB returns ctx carrying the worker's pool and its checkpoint grouping.
func withHandlerDB(ctx context.Context, pool *pgxpool.Pool, cp *Checkpoints) context.Context {
	return context.WithValue(ctx, handlerDBKey{}, handlerDB{pool: pool, checkpoints: cp})
}

// HandlerDBFrom returns the pool of the worker running the Go handler whose context ctx is; nil
// when ctx is not a handler's.
func HandlerDBFrom(ctx context.Context) *pgxpool.Pool {
	d, _ := ctx.Value(handlerDBKey{}).(handlerDB)
	return d.pool
}

// CheckpointsFrom returns the checkpoint grouping of the worker running the Go handler whose
// context ctx is; nil when ctx is not a handler's.
func CheckpointsFrom(ctx context.Context) *Checkpoints {
	d, _ := ctx.Value(handlerDBKey{}).(handlerDB)
	return d.checkpoints
}

// ErrSuspendedInDatabase is returned by a Go handler whose own lease-fenced statement already put
// its task back to pending (a durable workflow's wait for a signal registers the wait and snoozes
// the task in one transaction): the outcome is written, and the worker writes nothing more.
var ErrSuspendedInDatabase = errors.New("the task was suspended by the handler's own statement")

// ErrWaitingInDatabase is ErrSuspendedInDatabase for a task its handler's statement made wait
// for other tasks (a durable workflow's Await): its status is waiting.
var ErrWaitingInDatabase = fmt.Errorf("%w: it waits for other tasks", ErrSuspendedInDatabase)
