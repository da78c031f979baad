package taskorch

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
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

// HandlerOpts are the options of one task type's handler, given when it is registered (Handle,
// HandleFunc, AddHandler). The zero value, like a nil *HandlerOpts, means the worker's defaults.
//
//	taskorch.AddHandler(hs, sendReport, &taskorch.HandlerOpts{
//		Timeout:     time.Minute,
//		MaxAttempts: 5,
//		RetryDelay:  func(attempt int, err error) time.Duration { return time.Duration(attempt) * 10 * time.Second },
//	})
type HandlerOpts struct {
	// Timeout bounds one attempt of this type's tasks, in place of WorkerConfig.TaskTimeout:
	// when it passes, the handler's context is cancelled and the attempt fails (and is retried,
	// as any failure). Zero means the worker's TaskTimeout; negative means no bound for this
	// type, whatever the worker's (the lease still renews while the handler runs).
	Timeout time.Duration

	// MaxAttempts caps the attempts of this type's tasks, below each task's own max attempts
	// (EnqueueOpts.MaxAttempts): a retriable failure of attempt MaxAttempts or later ends the
	// task dead, as running out of its own attempts does. A task claimed past the cap (an
	// earlier attempt's lease expired) ends dead without running. Zero means no cap: the task's
	// own max attempts alone.
	MaxAttempts int

	// RetryDelay, when set, decides how long after a retriable failure of this type the task is
	// run again, in place of the database's exponential backoff (queues.retry_delay). attempt is
	// the attempt that failed (1 for the first run) and err what the handler returned (a
	// timeout's error names the timeout; a panic's, the panic). A negative delay means at once.
	// It is not called when no attempt remains. It must be safe for concurrent use; if it
	// panics, the database's backoff applies.
	RetryDelay func(attempt int, err error) time.Duration
}

// validate panics on options that are programming errors (as Handle does).
func (o HandlerOpts) validate(taskType string) {
	if o.MaxAttempts < 0 {
		panic(fmt.Sprintf("taskorch: handler options of %q: MaxAttempts must not be negative, got %d", taskType, o.MaxAttempts))
	}
}

// timeout is the bound of one attempt given the worker's TaskTimeout: 0 for none.
func (o HandlerOpts) timeout(workerTimeout time.Duration) time.Duration {
	switch {
	case o.Timeout < 0:
		return 0
	case o.Timeout > 0:
		return o.Timeout
	default:
		return workerTimeout
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
	if builtinTaskType(taskType) {
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
	o.validate(taskType)
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
	return h.fn(ctx, &TaskFor[T]{Task: t, Args: args})
}

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
