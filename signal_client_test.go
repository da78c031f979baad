package taskorch_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// Client.Signal records an event once: the first call returns true and its payload stays; a
// repeat returns false. SignalTx records with the caller's transaction, or not at all.
func TestClientSignal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)

	rec, err := c.Signal(ctx, "email.confirmed", "user-1", map[string]any{"ip": "1.2.3.4"})
	require.NoError(t, err)
	require.True(t, rec)
	rec, err = c.Signal(ctx, "email.confirmed", "user-1", struct {
		IP string `json:"ip"`
	}{"5.6.7.8"})
	require.NoError(t, err)
	require.False(t, rec)
	require.JSONEq(t, `{"ip": "1.2.3.4"}`, scalar[string](t, pool, `select queues.signal_payload('email.confirmed', 'user-1')::text`))

	rec, err = c.Signal(ctx, "email.confirmed", "user-2", nil)
	require.NoError(t, err)
	require.True(t, rec)
	require.Equal(t, "{}", scalar[string](t, pool, `select queues.signal_payload('email.confirmed', 'user-2')::text`))

	// Rolled back: nothing recorded. Committed: recorded.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	rec, err = c.SignalTx(ctx, tx, "approval", "doc-9", json.RawMessage(`{"by": "ann"}`))
	require.NoError(t, err)
	require.True(t, rec)
	require.NoError(t, tx.Rollback(ctx))
	require.Nil(t, scalar[*string](t, pool, `select queues.signal_payload('approval', 'doc-9')::text`))
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		rec, err = c.SignalTx(ctx, tx, "approval", "doc-9", json.RawMessage(`{"by": "bob"}`))
		return err
	}))
	require.True(t, rec)
	require.JSONEq(t, `{"by": "bob"}`, scalar[string](t, pool, `select queues.signal_payload('approval', 'doc-9')::text`))
}

// A signal with an empty name or key, an over-long one, or a payload that is not a JSON object
// (or too large, or not marshallable) is refused with ErrInvalidInput and records nothing.
func TestClientSignalBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDB(t)
	c, err := taskorch.NewClient(pool, &taskorch.ClientConfig{MaxPayloadBytes: 64})
	require.NoError(t, err)

	for _, tc := range []struct {
		name, key string
		payload   any
		msg       string
	}{
		{"", "k", nil, "signal: name must not be empty"},
		{"n", "", nil, `signal "n": key must not be empty`},
		{strings.Repeat("n", 129), "k", nil, "name is 129 characters, over the limit of 128"},
		{"n", strings.Repeat("k", 513), nil, "key is 513 characters, over the limit of 512"},
		{"n", "k", []int{1, 2}, "payload must be a JSON object, got an array"},
		{"n", "k", "text", "payload must be a JSON object, got a string"},
		{"n", "k", 42, "payload must be a JSON object, got a number"},
		{"n", "k", json.RawMessage(`null`), "payload must be a JSON object, got null"},
		{"n", "k", json.RawMessage(`{"a":`), "payload: json: error calling MarshalJSON"},
		{"n", "k", map[string]any{"c": make(chan int)}, "payload: json: unsupported type: chan int"},
		{"n", "k", map[string]string{"big": strings.Repeat("x", 100)}, "over the limit of 64 bytes"},
	} {
		rec, err := c.Signal(ctx, tc.name, tc.key, tc.payload)
		require.ErrorIs(t, err, taskorch.ErrInvalidInput, tc.msg)
		require.ErrorContains(t, err, tc.msg)
		require.False(t, rec)
	}
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.signal`), "bad input records nothing")

	// The database's own check (a NUL character) comes back as ErrInvalidInput too.
	_, err = c.Signal(ctx, "n", "k\x00", nil)
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.signal`))
}
