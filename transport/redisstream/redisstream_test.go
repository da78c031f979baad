package redisstream_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/redistest"
	"github.com/taskorch/taskorch/transport"
	"github.com/taskorch/taskorch/transport/redisstream"
)

// newTransport makes a transport and opens it as the worker does (no consumer: not opened, a
// sender only).
func newTransport(t *testing.T, url, consumer string, hold time.Duration) *redisstream.Transport {
	t.Helper()
	tr, err := redisstream.New(redisstream.Config{URL: url, Block: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tr.Close() })
	if consumer != "" {
		require.NoError(t, tr.Open(t.Context(), transport.OpenOptions{Consumer: consumer, Hold: hold}))
	}
	return tr
}

func receiveAll(t *testing.T, tr transport.Transport, want int) []transport.Message {
	t.Helper()
	var got []transport.Message
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		msgs, err := tr.Receive(t.Context(), want-len(got))
		require.NoError(t, err)
		got = append(got, msgs...)
	}
	return got
}

func ids(msgs []transport.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.TaskID
	}
	slices.Sort(out)
	return out
}

// Entries are read through the group in batches and acknowledged; the stream is trimmed below
// what is still pending.
func TestSendReceiveAck(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	tr := newTransport(t, srv.URL(0), "w1", time.Minute)
	require.NoError(t, tr.Ping(t.Context()))
	want := []int64{1, 2, 3, 4, 5}
	require.NoError(t, tr.Send(t.Context(), want))
	got := receiveAll(t, tr, 5)
	require.Equal(t, want, ids(got))
	require.NoError(t, tr.Ack(t.Context(), got))

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer func() { _ = rdb.Close() }()
	p, err := rdb.XPending(t.Context(), redisstream.DefaultStream, redisstream.DefaultGroup).Result()
	require.NoError(t, err)
	require.Zero(t, p.Count)

	// Nothing new: a blocked read returns nothing after Block.
	msgs, err := tr.Receive(t.Context(), 10)
	require.NoError(t, err)
	require.Empty(t, msgs)
}

// Entries left pending by a consumer that died are taken over by another once idle past the
// hold (XAUTOCLAIM); Extend keeps a live consumer's entries from being taken.
func TestTakeOverFromDeadConsumer(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	hold := 400 * time.Millisecond
	dead := newTransport(t, srv.URL(0), "dead", hold)
	alive := newTransport(t, srv.URL(0), "alive", hold)
	require.NoError(t, dead.Ping(t.Context()))
	require.NoError(t, dead.Send(t.Context(), []int64{10, 11}))
	got := receiveAll(t, dead, 2)
	require.Len(t, got, 2)

	// "dead" keeps 10 alive by extending it, and never acknowledges 11.
	require.Eventually(t, func() bool {
		_ = dead.Extend(context.WithoutCancel(t.Context()), got[:1])
		msgs, err := alive.Receive(t.Context(), 10)
		require.NoError(t, err)
		if len(msgs) == 0 {
			return false
		}
		require.Equal(t, []transport.Message{{TaskID: got[1].TaskID, Handle: got[1].Handle}}, msgs)
		return true
	}, 10*time.Second, 50*time.Millisecond)
}

// A Redis restart (no persistence) loses the stream and the group: Receive says so once, the
// group is made again, and what is sent afterwards is delivered.
func TestRestart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	tr := newTransport(t, srv.URL(0), "w1", time.Minute)
	require.NoError(t, tr.Ping(t.Context()))
	require.NoError(t, tr.Send(t.Context(), []int64{1}))
	require.Len(t, receiveAll(t, tr, 1), 1)

	srv.Stop()
	_, err := tr.Receive(t.Context(), 1)
	require.Error(t, err)
	require.Error(t, tr.Send(t.Context(), []int64{2}))
	require.Equal(t, []int64{2}, transport.Failed(tr.Send(t.Context(), []int64{2}), nil))

	srv.StartAgain()
	require.Eventually(t, func() bool { return tr.Ping(t.Context()) == nil }, 10*time.Second, 50*time.Millisecond)
	require.NoError(t, tr.Send(t.Context(), []int64{3}))
	require.Equal(t, []int64{3}, ids(receiveAll(t, tr, 1)))
}

// A dispatcher may send before any worker made the group (after a restart): the group starts
// at the beginning of the stream, so nothing sent before it is missed.
func TestSendBeforeGroup(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	sender := newTransport(t, srv.URL(0), "", time.Minute)
	require.NoError(t, sender.Send(t.Context(), []int64{5, 6}))
	tr := newTransport(t, srv.URL(0), "w1", time.Minute)
	require.Equal(t, []int64{5, 6}, ids(receiveAll(t, tr, 2)))
}

// New checks the URL without connecting, and never quotes it (it may hold a password); Open
// needs a consumer and a hold, once; Receive and Extend need Open.
func TestConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, want string }{
		{"", "needs a Redis URL"},
		{"http://x", "redis URL"},
		{"redis://u:s3cret@host:port/0", "redis URL"},
		{"redis://:s3cret@host/x", "redis URL"},
	} {
		tr, err := redisstream.New(redisstream.Config{URL: tc.url})
		require.ErrorContains(t, err, tc.want, tc.url)
		require.NotContains(t, err.Error(), "s3cret", "the password is not quoted")
		require.Nil(t, tr)
	}

	tr, err := redisstream.New(redisstream.Config{URL: "redis://u:s3cret@127.0.0.1:1/0"})
	require.NoError(t, err)
	defer func() { _ = tr.Close() }()
	require.Equal(t, redisstream.Name, tr.Name())
	require.NotContains(t, fmt.Sprintf("%v %+v %s", tr, tr, tr), "s3cret", "printing a transport does not show its URL")
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "transport", tr)
	require.Contains(t, buf.String(), "transport=redis")

	_, err = tr.Receive(t.Context(), 1)
	require.ErrorContains(t, err, "before Open")
	require.ErrorContains(t, tr.Extend(t.Context(), []transport.Message{{TaskID: 1, Handle: "1-0"}}), "before Open")
	require.ErrorContains(t, tr.Open(t.Context(), transport.OpenOptions{Hold: time.Second}), "consumer")
	require.ErrorContains(t, tr.Open(t.Context(), transport.OpenOptions{Consumer: "w1"}), "hold")
	require.NoError(t, tr.Open(t.Context(), transport.OpenOptions{Consumer: "w1", Hold: time.Second}))
	require.ErrorContains(t, tr.Open(t.Context(), transport.OpenOptions{Consumer: "w2", Hold: time.Second}), "already open")
}
