package providers_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/providers"
)

func TestMain(m *testing.M) { dbtest.Main(m, dbtest.CoreOptions()) }

// call is a channel call of task 42 with request v (a JSON string or a value to marshal).
func call(t *testing.T, v any) taskorch.ChannelCall {
	t.Helper()
	var raw json.RawMessage
	switch r := v.(type) {
	case string:
		raw = json.RawMessage(r)
	default:
		b, err := json.Marshal(v)
		require.NoError(t, err)
		raw = b
	}
	return taskorch.ChannelCall{Task: &taskorch.Task{ID: 42}, Request: raw, IdempotencyKey: "taskorch-task-42"}
}

// requirePermanent checks err is a Discard wrapping a *providers.Error and returns it.
func requirePermanent(t *testing.T, err error) *providers.Error {
	t.Helper()
	require.Error(t, err)
	var d *taskorch.DiscardError
	require.True(t, errors.As(err, &d), "want a Discard error, got %T: %v", err, err)
	var pe *providers.Error
	require.True(t, errors.As(err, &pe), "want a *providers.Error, got %T: %v", err, err)
	require.True(t, pe.Permanent)
	return pe
}

// requireRetriable checks err is a plain *providers.Error (not a Discard) and returns it.
func requireRetriable(t *testing.T, err error) *providers.Error {
	t.Helper()
	require.Error(t, err)
	var d *taskorch.DiscardError
	require.False(t, errors.As(err, &d), "want a retriable error, got a Discard: %v", err)
	var pe *providers.Error
	require.True(t, errors.As(err, &pe), "want a *providers.Error, got %T: %v", err, err)
	require.False(t, pe.Permanent)
	return pe
}

// requireNoSecret checks that none of secrets appears in err's message.
func requireNoSecret(t *testing.T, err error, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		require.NotContains(t, err.Error(), s, "a credential leaked into the error")
	}
}

// decode unmarshals a provider response.
func decode(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m
}
