package taskorch

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/taskorch/taskorch/internal/worker"
)

// TaskFor is a task whose payload has been decoded into its args type.
type TaskFor[T TaskArgs] struct {
	*Task
	Args T

	result *worker.ResultSlot // where SetResult puts the task's result; nil outside a worker
}

// validateHandlerOpts panics on options that are programming errors (as Handle does).
func validateHandlerOpts(o HandlerOpts, taskType string) {
	if o.MaxAttempts < 0 {
		panic(fmt.Sprintf("taskorch: handler options of %q: MaxAttempts must not be negative, got %d", taskType, o.MaxAttempts))
	}
}

// Handlers maps task types to handlers. The zero value is not usable; make one with NewHandlers.
// Safe for concurrent use.
type Handlers struct {
	mu sync.RWMutex
	m  map[string]handlerEntry
}

// handlerEntry is a registered handler with its options.
type handlerEntry struct {
	h    Handler
	opts HandlerOpts
}

// NewHandlers returns an empty registry.
func NewHandlers() *Handlers { return &Handlers{m: map[string]handlerEntry{}} }

// Handle registers h for taskType, with options: opts is at most one *HandlerOpts (nil, or none,
// means the defaults). It panics if taskType is malformed, reserved for a built-in processor
// (db_function and the channel types), or already registered, or if the options are invalid:
// these are programming errors, found at start-up.
func (hs *Handlers) Handle(taskType string, h Handler, opts ...*HandlerOpts) {
	if err := ValidateTaskType(taskType); err != nil {
		panic(err)
	}
	if taskType == TypeDBFunction || worker.IsChannelType(taskType) {
		panic(fmt.Sprintf("taskorch: task type %q is built in; it cannot have a Go handler", taskType))
	}
	if h == nil {
		panic("taskorch: nil handler for " + taskType)
	}
	if len(opts) > 1 {
		panic(fmt.Sprintf("taskorch: handler of %q given %d *HandlerOpts; pass at most one", taskType, len(opts)))
	}
	var o HandlerOpts
	if len(opts) == 1 && opts[0] != nil {
		o = *opts[0]
	}
	validateHandlerOpts(o, taskType)
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if _, dup := hs.m[taskType]; dup {
		panic(fmt.Sprintf("taskorch: task type %q has a handler already", taskType))
	}
	hs.m[taskType] = handlerEntry{h: h, opts: o}
}

// HandleFunc registers fn for taskType, with options (see Handle).
func (hs *Handlers) HandleFunc(taskType string, fn func(ctx context.Context, t *Task) error, opts ...*HandlerOpts) {
	hs.Handle(taskType, HandlerFunc(fn), opts...)
}

// AddHandler registers a typed handler: the task type is T's TaskType(), and the payload is
// decoded into a T before fn runs. A payload that does not decode fails the task for good
// (retrying cannot fix it), with the decoding error recorded. opts is at most one *HandlerOpts
// (see Handle):
//
//	taskorch.AddHandler(hs, sendReport)                                         // the defaults
//	taskorch.AddHandler(hs, sendReport, &taskorch.HandlerOpts{Timeout: time.Minute}) // options
func AddHandler[T TaskArgs](hs *Handlers, fn func(ctx context.Context, t *TaskFor[T]) error, opts ...*HandlerOpts) {
	var zero T
	hs.Handle(zero.TaskType(), typedHandler[T]{fn: fn}, opts...)
}

type typedHandler[T TaskArgs] struct {
	fn func(ctx context.Context, t *TaskFor[T]) error
}

func (h typedHandler[T]) Work(ctx context.Context, t *Task) error {
	var args T
	if err := json.Unmarshal(t.Payload, &args); err != nil {
		return Discard(fmt.Errorf("payload does not decode into %T: %w", args, err))
	}
	return h.fn(ctx, &TaskFor[T]{Task: t, Args: args, result: worker.ResultSlotFrom(ctx)})
}

// handlerSet is the worker's view of a Handlers (worker.Handlers).
type handlerSet struct{ hs *Handlers }

// Lookup returns the handler of taskType and its options.
func (s handlerSet) Lookup(taskType string) (Handler, HandlerOpts, bool) {
	e, ok := s.hs.lookup(taskType)
	return e.h, e.opts, ok
}

// Types lists the registered types.
func (s handlerSet) Types() []string { return s.hs.Types() }

func (hs *Handlers) lookup(taskType string) (handlerEntry, bool) {
	if hs == nil {
		return handlerEntry{}, false
	}
	hs.mu.RLock()
	defer hs.mu.RUnlock()
	e, ok := hs.m[taskType]
	return e, ok
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
