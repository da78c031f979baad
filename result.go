package taskorch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// A task's result is what it returned: a Go handler's SetResult or AddHandlerWithResult return
// value, a db_function envelope's "payload". The worker stores it in queues.task.result in the
// completion's own statement (queues.complete_tasks_with_results), so a completed task and its
// result commit together; Client.Get and Client.Wait return it as Task.Result. A result over
// WorkerConfig.MaxResultBytes (1 MiB by default), or over the database's 8 MiB, fails the task
// without retry instead: a result is never stored cut short.

// resultSlot holds the result a Go handler's task will complete with.
type resultSlot struct {
	max int // WorkerConfig.MaxResultBytes; negative: no bound

	mu    sync.Mutex
	value json.RawMessage // nil: no result
	over  string          // set when a result over the bound was given: the task fails with it
}

type resultSlotKey struct{}

// maxDatabaseResultBytes is the database's bound on a result (internal.max_payload_bytes(), as
// pg_column_size counts it), for messages.
const maxDatabaseResultBytes = 8 << 20

// withResultSlot returns ctx carrying s, for SetResult.
func withResultSlot(ctx context.Context, s *resultSlot) context.Context {
	return context.WithValue(ctx, resultSlotKey{}, s)
}

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
	s, _ := ctx.Value(resultSlotKey{}).(*resultSlot)
	if s == nil {
		return inputErrorf("SetResult needs the context a worker gave a Go handler; this one carries no task")
	}
	b, err := encodeResult(v)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if msg := s.checkSize(b); msg != "" {
		s.over = msg
		return &InputError{Msg: msg}
	}
	s.value, s.over = b, ""
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

// checkSize returns the failure message of a result over the bound, or "".
func (s *resultSlot) checkSize(b []byte) string {
	if s.max < 0 || len(b) <= s.max {
		return ""
	}
	return resultTooLarge(len(b), s.max)
}

// resultTooLarge is the message a task fails with when its result is over the worker's bound.
func resultTooLarge(size, limit int) string {
	return fmt.Sprintf("the task's result is %d bytes, over the worker's limit of %d bytes "+
		"(WorkerConfig.MaxResultBytes, 1 MiB by default; the database refuses results over 8 MiB whatever it is); "+
		"the task is failed, its result not stored", size, limit)
}

// get returns the result, or the message the task must fail with.
func (s *resultSlot) get() (json.RawMessage, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.value, s.over
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
			if s, _ := ctx.Value(resultSlotKey{}).(*resultSlot); s != nil {
				if _, over := s.get(); over != "" {
					return nil // the worker fails the task with the bound's message (runHandler)
				}
			}
			return Discard(err)
		}
		return nil
	}, opts...)
}
