package taskorch

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/taskorch/taskorch/internal/worker"
)

// A task's result is what it returned: a Go handler's SetResult or AddHandlerWithResult return
// value, a db_function envelope's "payload". The worker stores it in queues.task.result in the
// completion's own statement (queues.complete_tasks_with_results), so a completed task and its
// result commit together; Client.Get and Client.Wait return it as Task.Result. A result over
// WorkerConfig.MaxResultBytes (1 MiB by default), or over the database's 8 MiB, fails the task
// without retry instead: a result is never stored cut short (internal/worker/result.go).

// SetResult sets the result of the task whose handler's context ctx is: v is marshalled to JSON
// now and stored with the task's completion (Task.Result). A later call replaces an earlier one;
// nil (or a JSON null) clears it. The result is stored only if the handler then returns nil.
//
// It returns an error matching ErrInvalidInput when ctx is not a Go handler's, or v does not
// marshal to JSON (a json.RawMessage that is not valid JSON, a channel, a NaN): the result is
// left as it was. A result over WorkerConfig.MaxResultBytes is refused too, and the task then
// fails without retry even if the handler ignores the error: a task never completes with its
// result cut or missing.
func SetResult(ctx context.Context, v any) error {
	s := worker.ResultSlotFrom(ctx)
	if s == nil {
		return inputErrorf("SetResult needs the context a worker gave a Go handler; this one carries no task")
	}
	return setResultIn(s, v)
}

// setResultIn is SetResult into slot s.
func setResultIn(s *worker.ResultSlot, v any) error {
	b, err := encodeResult(v)
	if err != nil {
		return err
	}
	if msg := s.Set(b); msg != "" {
		return &InputError{Msg: msg}
	}
	return nil
}

// encodeResult marshals v to compact JSON; nil for nil or a JSON null.
func encodeResult(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, inputErrorf("the task's result does not marshal to JSON: %v", err)
	}
	if bytes.Equal(b, []byte("null")) {
		return nil, nil
	}
	return b, nil
}

// AddHandlerWithResult registers a typed handler that returns a result: the task type is T's
// TaskType(), the payload is decoded into a T, and what fn returns with a nil error is the task's
// result (SetResult's rules: marshalled to JSON, bounded by WorkerConfig.MaxResultBytes). A
// result that does not marshal to JSON, or is over the bound, fails the task without retry. opts
// is at most one *HandlerOpts (see Handle).
//
//	taskorch.AddHandlerWithResult(hs, func(ctx context.Context, t *taskorch.TaskFor[Resize]) (Thumb, error) {
//		return resize(ctx, t.Args)
//	})
func AddHandlerWithResult[T TaskArgs, R any](hs *Handlers, fn func(ctx context.Context, t *TaskFor[T]) (R, error), opts ...*HandlerOpts) {
	AddHandler(hs, func(ctx context.Context, t *TaskFor[T]) error {
		r, err := fn(ctx, t)
		if err != nil {
			return err
		}
		if err := SetResult(ctx, r); err != nil {
			if s := worker.ResultSlotFrom(ctx); s != nil && s.Over() {
				return nil // the worker fails the task with the bound's message
			}
			return Discard(err)
		}
		return nil
	}, opts...)
}
