package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// A task's result is what it returned: a Go handler's SetResult or AddHandlerWithResult return
// value, a db_function envelope's "payload". The writer stores it in queues.task.result in the
// completion's own statement (queues.complete_tasks_with_results), so a completed task and its
// result commit together. A result over WorkerConfig.MaxResultBytes (1 MiB by default), or over
// the database's 8 MiB, fails the task without retry instead: a result is never stored cut short.

// ResultSlot holds the result a Go handler's task will complete with. The worker puts one in
// each Go handler's context; taskorch.SetResult fills it.
type ResultSlot struct {
	max int // WorkerConfig.MaxResultBytes; negative: no bound

	mu    sync.Mutex
	value json.RawMessage // nil: no result
	over  string          // set when a result over the bound was given: the task fails with it
}

type resultSlotKey struct{}

// maxDatabaseResultBytes is the database's bound on a result (internal.max_payload_bytes(), as
// pg_column_size counts it), for messages.
const maxDatabaseResultBytes = 8 << 20

// withResultSlot returns ctx carrying s.
func withResultSlot(ctx context.Context, s *ResultSlot) context.Context {
	return context.WithValue(ctx, resultSlotKey{}, s)
}

// ResultSlotFrom returns the result slot of the Go handler whose context ctx is; nil when ctx
// is not a handler's.
func ResultSlotFrom(ctx context.Context) *ResultSlot {
	s, _ := ctx.Value(resultSlotKey{}).(*ResultSlot)
	return s
}

// Set sets the result to b (JSON; nil: none). Over the worker's bound it is refused: Set returns
// the message the task will fail with, and the result stays as it was.
func (s *ResultSlot) Set(b json.RawMessage) (over string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max >= 0 && len(b) > s.max {
		s.over = resultTooLarge(len(b), s.max, false)
		return s.over
	}
	s.value, s.over = b, ""
	return ""
}

// Over reports whether the last result given was over the bound: the task will fail with it.
func (s *ResultSlot) Over() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.over != ""
}

// get returns the result, or the message the task must fail with.
func (s *ResultSlot) get() (json.RawMessage, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.value, s.over
}

// resultTooLarge is the message a task fails with when its result is over a bound: the
// worker's limit (WorkerConfig.MaxResultBytes), or with database the database's 8 MiB, which
// queues.complete_tasks_with_results enforces with the same words.
func resultTooLarge(size, limit int, database bool) string {
	bound := fmt.Sprintf("the worker's limit of %d bytes "+
		"(WorkerConfig.MaxResultBytes, 1 MiB by default; the database refuses results over 8 MiB whatever it is)", limit)
	if database {
		bound = fmt.Sprintf("the database's limit of %d bytes (8 MiB) per task", limit)
	}
	return fmt.Sprintf("the task's result is %d bytes, over %s; the task is failed, its result not stored", size, bound)
}

// NewResultSlot returns an empty slot bounded by max bytes (negative: no bound), and ctx
// carrying it: a Go handler's context as far as SetResult is concerned, for package
// taskorchtest's handler context.
func NewResultSlot(ctx context.Context, max int) (context.Context, *ResultSlot) {
	s := &ResultSlot{max: max}
	return withResultSlot(ctx, s), s
}

// Value returns the result set last (nil: none), and the message the task would fail with when
// the last result given was over the bound.
func (s *ResultSlot) Value() (json.RawMessage, string) { return s.get() }
