package taskorch_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

type middlewareKey struct{}

// record returns a middleware that appends "name>" before and "<name" after the handler, and
// what it saw of the task.
func record(name string, mu *sync.Mutex, trail *[]string) taskorch.Middleware {
	return func(next taskorch.Handler) taskorch.Handler {
		return taskorch.HandlerFunc(func(ctx context.Context, t *taskorch.Task) error {
			mu.Lock()
			*trail = append(*trail, fmt.Sprintf("%s>%s#%d", name, t.Type, t.ID))
			mu.Unlock()
			prev, _ := ctx.Value(middlewareKey{}).(string)
			err := next.Work(context.WithValue(ctx, middlewareKey{}, prev+name), t)
			mu.Lock()
			*trail = append(*trail, "<"+name)
			mu.Unlock()
			return err
		})
	}
}

type mwArgs struct {
	N int `json:"n"`
}

func (mwArgs) TaskType() string { return "mw_typed" }

// Middleware wraps every Go handler, the first outermost; it sees the task and hands the
// handler a context of its own, typed handlers included. A db_function task does not pass
// through it.
func TestMiddlewareWrapsInOrder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	mustExec(t, pool, `create schema mwfn;
		create function mwfn.ping(jsonb) returns jsonb language sql as $$ select '{"status": "succeeded"}'::jsonb $$;
		grant usage on schema mwfn to worker_service_user;
		grant execute on function mwfn.ping(jsonb) to worker_service_user`)

	var mu sync.Mutex
	var trail []string
	seen := make(chan string, 2)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("mw_plain", func(ctx context.Context, _ *taskorch.Task) error {
		seen <- ctx.Value(middlewareKey{}).(string)
		return nil
	})
	taskorch.AddHandler(hs, func(ctx context.Context, t *taskorch.TaskFor[mwArgs]) error {
		seen <- fmt.Sprintf("%s n=%d", ctx.Value(middlewareKey{}), t.Args.N)
		return nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs,
		Middleware: []taskorch.Middleware{record("a", &mu, &trail), record("b", &mu, &trail)}})

	fn, err := c.Enqueue(ctx, raw("db_function", `{"db_function": "mwfn.ping"}`), nil)
	require.NoError(t, err)
	waitStatus(t, pool, fn.TaskID, taskorch.StatusCompleted)
	mu.Lock()
	require.Empty(t, trail, "a db_function task does not pass through the middleware")
	mu.Unlock()

	plain, err := c.Enqueue(ctx, raw("mw_plain", `{}`), nil)
	require.NoError(t, err)
	require.Equal(t, "ab", <-seen, "the outer middleware's context reaches the inner one and the handler")
	waitStatus(t, pool, plain.TaskID, taskorch.StatusCompleted)
	mu.Lock()
	require.Equal(t, []string{fmt.Sprintf("a>mw_plain#%d", plain.TaskID), fmt.Sprintf("b>mw_plain#%d", plain.TaskID), "<b", "<a"}, trail)
	mu.Unlock()

	typed, err := c.Enqueue(ctx, mwArgs{N: 7}, nil)
	require.NoError(t, err)
	require.Equal(t, "ab n=7", <-seen)
	waitStatus(t, pool, typed.TaskID, taskorch.StatusCompleted)
}

// A panic policy as middleware: a handler's panic, recovered, fails the task for good
// (Discard) instead of being retried, and the middleware decides the message. Without it the
// worker recovers the panic and the attempt is retried.
func TestMiddlewarePanicPolicy(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	discardPanics := func(next taskorch.Handler) taskorch.Handler {
		return taskorch.HandlerFunc(func(ctx context.Context, t *taskorch.Task) (err error) {
			defer func() {
				if v := recover(); v != nil {
					err = taskorch.Discard(fmt.Errorf("panic policy: %v", v))
				}
			}()
			return next.Work(ctx, t)
		})
	}
	hs := taskorch.NewHandlers()
	hs.HandleFunc("mw_panics", func(context.Context, *taskorch.Task) error { panic("boom") })
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Middleware: []taskorch.Middleware{discardPanics}})

	res, err := c.Enqueue(ctx, raw("mw_panics", `{}`), &taskorch.EnqueueOpts{MaxAttempts: 5})
	require.NoError(t, err)
	waitStatus(t, pool, res.TaskID, taskorch.StatusFailed)
	require.Equal(t, 1, scalar[int](t, pool, `select attempt from queues.task where task_id = $1`, res.TaskID), "not retried")
	require.Equal(t, "panic policy: boom", lastError(t, pool, res.TaskID))
}

// A nil middleware is refused when the worker is made; a middleware that returns a nil handler
// fails the attempt with a message that says so.
func TestMiddlewareRefusesNil(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	_, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{Middleware: []taskorch.Middleware{nil}})
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	require.ErrorContains(t, err, "Middleware[0] is nil")

	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("mw_nil", func(context.Context, *taskorch.Task) error { return nil })
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs,
		Middleware: []taskorch.Middleware{func(taskorch.Handler) taskorch.Handler { return nil }}})
	res, err := c.Enqueue(t.Context(), raw("mw_nil", `{}`), &taskorch.EnqueueOpts{MaxAttempts: 1})
	require.NoError(t, err)
	waitStatus(t, pool, res.TaskID, taskorch.StatusDead)
	require.True(t, strings.Contains(lastError(t, pool, res.TaskID), "middleware 1 of 1 returned a nil handler"))
}
