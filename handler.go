package taskorch

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// Handler runs tasks of one type. Work returns nil when the task is done, an error to fail the
// attempt (it is retried with backoff while attempts remain), or a control error: Snooze (run
// again later without spending an attempt) or Discard (fail for good, no retry).
//
// ctx is cancelled when the task times out, when the worker loses the task's lease (it was
// cancelled, or it expired and was taken over) and when the worker shuts down; handlers should
// return promptly then.
type Handler interface {
	Work(ctx context.Context, t *Task) error
}

// HandlerFunc adapts a function to a Handler: the untyped form, for payloads a handler reads as
// raw JSON (the SQL-first world).
type HandlerFunc func(ctx context.Context, t *Task) error

// Work calls f.
func (f HandlerFunc) Work(ctx context.Context, t *Task) error { return f(ctx, t) }

// TaskFor is a task whose payload has been decoded into its args type.
type TaskFor[T TaskArgs] struct {
	*Task
	Args T
}

// Handlers maps task types to handlers. The zero value is not usable; make one with NewHandlers.
// Safe for concurrent use.
type Handlers struct {
	mu sync.RWMutex
	m  map[string]Handler
}

// NewHandlers returns an empty registry.
func NewHandlers() *Handlers { return &Handlers{m: map[string]Handler{}} }

// Handle registers h for taskType. It panics if taskType is malformed, reserved for a built-in
// processor (db_function and the channel types), or already registered: these are programming
// errors, found at start-up.
func (hs *Handlers) Handle(taskType string, h Handler) {
	if err := ValidateTaskType(taskType); err != nil {
		panic(err)
	}
	if builtinTaskType(taskType) {
		panic(fmt.Sprintf("taskorch: task type %q is built in; it cannot have a Go handler", taskType))
	}
	if h == nil {
		panic("taskorch: nil handler for " + taskType)
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if _, dup := hs.m[taskType]; dup {
		panic(fmt.Sprintf("taskorch: task type %q has a handler already", taskType))
	}
	hs.m[taskType] = h
}

// HandleFunc registers fn for taskType (see Handle).
func (hs *Handlers) HandleFunc(taskType string, fn func(ctx context.Context, t *Task) error) {
	hs.Handle(taskType, HandlerFunc(fn))
}

// AddHandler registers a typed handler: the task type is T's TaskType(), and the payload is
// decoded into a T before fn runs. A payload that does not decode fails the task for good
// (retrying cannot fix it), with the decoding error recorded.
func AddHandler[T TaskArgs](hs *Handlers, fn func(ctx context.Context, t *TaskFor[T]) error) {
	var zero T
	hs.Handle(zero.TaskType(), typedHandler[T]{fn: fn})
}

type typedHandler[T TaskArgs] struct {
	fn func(ctx context.Context, t *TaskFor[T]) error
}

func (h typedHandler[T]) Work(ctx context.Context, t *Task) error {
	var args T
	if err := json.Unmarshal(t.Payload, &args); err != nil {
		return Discard(fmt.Errorf("payload does not decode into %T: %w", args, err))
	}
	return h.fn(ctx, &TaskFor[T]{Task: t, Args: args})
}

func (hs *Handlers) lookup(taskType string) (Handler, bool) {
	if hs == nil {
		return nil, false
	}
	hs.mu.RLock()
	defer hs.mu.RUnlock()
	h, ok := hs.m[taskType]
	return h, ok
}

// Types lists the registered task types.
func (hs *Handlers) Types() []string {
	if hs == nil {
		return nil
	}
	hs.mu.RLock()
	defer hs.mu.RUnlock()
	out := make([]string, 0, len(hs.m))
	for t := range hs.m {
		out = append(out, t)
	}
	return out
}
