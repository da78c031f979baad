// Package builtinhandlers holds the utility handlers every stock taskorch worker runs: a no-op (for
// benchmarks and smoke tests), a sleep and a deliberate failure (for demos and fault tests).
package builtinhandlers

import (
	"context"
	"errors"
	"time"

	"github.com/taskorch/taskorch"
)

// NoopArgs is the payload of taskorch.noop: nothing.
type NoopArgs struct{}

// TaskType returns "taskorch.noop".
func (NoopArgs) TaskType() string { return "taskorch.noop" }

// SleepArgs is the payload of taskorch.sleep.
type SleepArgs struct {
	// Millis is how long to sleep; the task's context cuts it short.
	Millis int `json:"ms"`
}

// TaskType returns "taskorch.sleep".
func (SleepArgs) TaskType() string { return "taskorch.sleep" }

// FailArgs is the payload of taskorch.fail.
type FailArgs struct {
	Message string `json:"message"`
	Panic   bool   `json:"panic"`   // panic instead of returning an error
	Discard bool   `json:"discard"` // fail for good, no retry
}

// TaskType returns "taskorch.fail".
func (FailArgs) TaskType() string { return "taskorch.fail" }

// Register adds the built-in handlers to hs.
func Register(hs *taskorch.Handlers) {
	taskorch.AddHandler(hs, func(context.Context, *taskorch.TaskFor[NoopArgs]) error { return nil })
	taskorch.AddHandler(hs, func(ctx context.Context, t *taskorch.TaskFor[SleepArgs]) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(t.Args.Millis) * time.Millisecond):
			return nil
		}
	})
	taskorch.AddHandler(hs, func(_ context.Context, t *taskorch.TaskFor[FailArgs]) error {
		msg := t.Args.Message
		if msg == "" {
			msg = "taskorch.fail: failing as asked"
		}
		switch {
		case t.Args.Panic:
			panic(msg)
		case t.Args.Discard:
			return taskorch.Discard(errors.New(msg))
		}
		return errors.New(msg)
	})
}
