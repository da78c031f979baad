package tasktype

import (
	"context"
	"encoding/json"
)

// TypeDBFunction is the task type whose payload names a SQL function to run:
// {"db_function": "schema.function", ...}. The function gets the whole payload.
const TypeDBFunction = "db_function"

// The channel task types: one provider call each, wrapped in before/success/error handlers.
const (
	TypeEmail      = "email"
	TypeSMS        = "sms"
	TypeFileDelete = "file_delete"
)

// ChannelTypes lists the channel task types.
var ChannelTypes = []string{TypeEmail, TypeSMS, TypeFileDelete}

// ChannelProvider makes a channel task's one provider call (send an email, an SMS, delete a
// file). request is the before handler's envelope payload, or the task's payload when the task
// has no before handler. The response is passed to the success handler as worker_payload.
//
// Return Discard(err) for a failure retrying cannot fix (a 4xx from the provider): a task
// without handlers then fails without a retry; for a task owned by a supervisor every failure
// goes to its error handler, a Discard with error_class "permanent" (the supervisor ends the
// process at once), any other error "retriable".
type ChannelProvider interface {
	Call(ctx context.Context, call ChannelCall) (response json.RawMessage, err error)
}

// ChannelProviderFunc adapts a function to a ChannelProvider.
type ChannelProviderFunc func(ctx context.Context, call ChannelCall) (json.RawMessage, error)

// Call calls f.
func (f ChannelProviderFunc) Call(ctx context.Context, call ChannelCall) (json.RawMessage, error) {
	return f(ctx, call)
}

// ChannelCall is one provider call.
type ChannelCall struct {
	Task    *Task
	Request json.RawMessage
	// IdempotencyKey is stable across re-runs of the task (after a crash), for providers that
	// deduplicate requests (Resend does): "taskorch-task-<id>".
	IdempotencyKey string
}
