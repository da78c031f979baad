package transport_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/transport"
)

// A message body is the task id in decimal; anything else is refused, quoted at most 64 bytes.
func TestEncodeDecodeID(t *testing.T) {
	t.Parallel()
	id, err := transport.DecodeID(transport.EncodeID(9007199254740993))
	require.NoError(t, err)
	require.Equal(t, int64(9007199254740993), id)
	for _, bad := range []string{"", "0", "-1", "1.5", " 1", "x", strings.Repeat("9", 100)} {
		_, err := transport.DecodeID(bad)
		require.ErrorContains(t, err, "not a task id", bad)
		require.Less(t, len(err.Error()), 140)
	}
}

// Failed tells which ids a Send did not send: a *SendError's, wrapped or not, else all.
func TestFailed(t *testing.T) {
	t.Parallel()
	ids := []int64{1, 2, 3}
	se := &transport.SendError{Failed: []int64{2}, Err: errors.New("throttled")}
	require.Equal(t, []int64{2}, transport.Failed(se, ids))
	require.Equal(t, []int64{2}, transport.Failed(fmt.Errorf("send: %w", se), ids))
	require.Equal(t, ids, transport.Failed(errors.New("connection refused"), ids))
	require.Equal(t, "transport: 1 message(s) not sent: throttled", se.Error())
	require.ErrorContains(t, errors.Unwrap(se), "throttled")
}
