package taskorch

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/taskorch/taskorch/internal/worker"
	"github.com/taskorch/taskorch/tasktype"
)

// DefaultBatchMaxSize is the most tasks one call of a batch handler takes when BatchOpts.MaxSize
// is 0.
const DefaultBatchMaxSize = 100

// BatchOpts are the options of a batch handler (AddBatchHandler). The zero value, like a nil
// *BatchOpts, means batches of up to DefaultBatchMaxSize tasks, made of what the worker has
// claimed, without waiting for more, and the worker's defaults for the rest.
type BatchOpts struct {
	// MaxSize is the most tasks one call takes. Zero means DefaultBatchMaxSize. A batch is also
	// bounded by the worker's free slots (each task of a batch takes one, see docs/worker.md,
	// "Batch handlers") and by what the claims brought.
	MaxSize int

	// MaxWait is how long a started batch stays open to more tasks of its type that the worker
	// claims meanwhile, until it holds MaxSize tasks. Zero means no wait: a batch is the tasks
	// of the type that the worker's buffer holds when its first task starts (what one claim
	// brought, or a few). A task is never held back more than MaxWait.
	MaxWait time.Duration

	// HandlerOpts apply to each task of a batch as to a task of a single handler: Timeout bounds
	// each task's attempt from its start, its wait for the batch included (the batch's context
	// ends once every task in it has been stopped),
	// WarnAfter, MaxAttempts and RetryDelay apply to each task and to the error it was given.
	HandlerOpts
}

// AddBatchHandler registers a batch handler: one call of fn takes several claimed tasks of type
// T (T's TaskType()), each payload decoded into a T. fn returns one error per task, in the order
// of tasks: nil completes that task, an error fails that attempt of it (retried while attempts
// remain), and a control error (Snooze, RateLimited, Discard) applies to that task alone. A
// returned slice of another length, or a panic, fails the attempt of every task of the call, with
// an error that says so; they are retried as any failure. A payload that does not decode fails
// that task for good and is left out of the call. TaskFor.SetResult sets a task's result.
//
// The worker forms batches from the tasks it claimed through its normal claim path, so limits,
// keys, pauses and fencing hold unchanged; each task keeps its own slot, lease (renewed while the
// batch runs), timeout, observers' events and outcome. ctx is the batch's: it carries no single
// task's result slot, and it is cancelled only once every task of the call has been stopped (timed
// out, its lease lost, the worker's shutdown). A task whose lease is lost while the call runs
// (it was cancelled, or it expired and was taken over) is not stopped in fn: what fn returns for
// it is refused by its lease's fence, and the others' outcomes are written. docs/worker.md,
// "Batch handlers", says more.
//
// It panics, as Handle does, if T's type is malformed, built in or already registered, if fn is
// nil, or if the options are invalid (a negative MaxSize or MaxWait, a negative MaxAttempts).
//
//	taskorch.AddBatchHandler(hs, func(ctx context.Context, tasks []*taskorch.TaskFor[Push]) []error {
//		return pushAll(ctx, tasks)
//	}, &taskorch.BatchOpts{MaxSize: 50, MaxWait: 100 * time.Millisecond})
func AddBatchHandler[T TaskArgs](hs *Handlers, fn func(ctx context.Context, tasks []*TaskFor[T]) []error, opts *BatchOpts) {
	var zero T
	taskType := zero.TaskType()
	if fn == nil {
		panic("taskorch: nil batch handler for " + taskType)
	}
	var o BatchOpts
	if opts != nil {
		o = *opts
	}
	if o.MaxSize < 0 {
		panic(fmt.Sprintf("taskorch: batch handler options of %q: MaxSize must not be negative, got %d", taskType, o.MaxSize))
	}
	if o.MaxWait < 0 {
		panic(fmt.Sprintf("taskorch: batch handler options of %q: MaxWait must not be negative, got %s", taskType, o.MaxWait))
	}
	if o.MaxSize == 0 {
		o.MaxSize = DefaultBatchMaxSize
	}
	hs.Handle(taskType, batchHandler[T]{fn: fn, maxSize: o.MaxSize, maxWait: o.MaxWait}, &o.HandlerOpts)
}

// batchHandler is a typed batch handler: the worker's BatchHandler.
type batchHandler[T TaskArgs] struct {
	fn      func(ctx context.Context, tasks []*TaskFor[T]) []error
	maxSize int
	maxWait time.Duration
}

var _ worker.BatchHandler = batchHandler[TaskArgs]{}

// BatchLimits returns the options' MaxSize and MaxWait.
func (h batchHandler[T]) BatchLimits() (int, time.Duration) { return h.maxSize, h.maxWait }

// Work runs one task as a batch of one (taskorchtest's RunTask runs a task this way).
func (h batchHandler[T]) Work(ctx context.Context, t *Task) error {
	return h.WorkBatch(ctx, []*tasktype.Task{t}, []*worker.ResultSlot{worker.ResultSlotFrom(ctx)})[0]
}

// WorkBatch decodes the tasks' payloads and calls fn with those that decode.
func (h batchHandler[T]) WorkBatch(ctx context.Context, tasks []*tasktype.Task, results []*worker.ResultSlot) []error {
	errs := make([]error, len(tasks))
	typed := make([]*TaskFor[T], 0, len(tasks))
	at := make([]int, 0, len(tasks)) // typed[j] is tasks[at[j]]
	for i, t := range tasks {
		var args T
		if err := json.Unmarshal(t.Payload, &args); err != nil {
			errs[i] = Discard(fmt.Errorf("payload does not decode into %T: %w", args, err))
			continue
		}
		tf := &TaskFor[T]{Task: t, Args: args}
		if i < len(results) {
			tf.result = results[i]
		}
		typed, at = append(typed, tf), append(at, i)
	}
	if len(typed) == 0 {
		return errs
	}
	got := h.fn(ctx, typed)
	if len(got) != len(typed) {
		var zero T
		err := fmt.Errorf("the batch handler of %q returned %d errors for a batch of %d tasks; it must return one per task, in order: every task of the batch fails",
			zero.TaskType(), len(got), len(typed))
		for _, i := range at {
			errs[i] = err
		}
		return errs
	}
	for j, i := range at {
		errs[i] = got[j]
	}
	return errs
}

// SetResult sets the task's result, as SetResult does for the task of a handler's context: v is
// marshalled to JSON now and stored with the task's completion, if its handler (or its batch
// handler's error for it) is then nil. It is how a batch handler (AddBatchHandler) sets each
// task's result; a single handler's task may use it too. It returns an error matching
// ErrInvalidInput when the task was not given by a worker, or v does not marshal to JSON, or is
// over WorkerConfig.MaxResultBytes (the task then fails without retry).
func (t *TaskFor[T]) SetResult(v any) error {
	if t.result == nil {
		return inputErrorf("TaskFor.SetResult needs a task a worker gave a handler; this one has no result slot")
	}
	return setResultIn(t.result, v)
}
