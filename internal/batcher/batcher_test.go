package batcher_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/batcher"
)

// A call alone runs at once, in a batch of one; the calls that arrive while a batch runs go
// together into the next, each answered with its own result.
func TestCallsWhileABatchRunsGoTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	release := make(chan struct{})
	started := make(chan []int, 10)
	b := batcher.New(100, func(_ context.Context, reqs []int) ([]batcher.Result[string], error) {
		started <- reqs
		<-release
		out := make([]batcher.Result[string], len(reqs))
		for i, r := range reqs {
			out[i].Value = fmt.Sprint("r", r)
		}
		return out, nil
	})

	first := make(chan string, 1)
	go func() {
		v, err := b.Do(ctx, 0)
		require.NoError(t, err)
		first <- v
	}()
	require.Equal(t, []int{0}, <-started, "the first call starts a batch at once")

	const n = 20
	var wg sync.WaitGroup
	got := make([]string, n)
	for i := 1; i <= n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := b.Do(ctx, i)
			require.NoError(t, err)
			got[i-1] = v
		}()
	}
	// Let the n calls queue up behind the running batch, then release it.
	require.Eventually(t, func() bool { return b.Waiting() == n }, 10*time.Second, time.Millisecond)
	close(release)
	require.Equal(t, "r0", <-first)
	second := <-started
	require.Len(t, second, n, "every call that arrived meanwhile is in the next batch")
	wg.Wait()
	for i := 1; i <= n; i++ {
		require.Equal(t, fmt.Sprint("r", i), got[i-1])
	}
	require.Eventually(t, func() bool { return !b.Running() }, 10*time.Second, time.Millisecond,
		"no goroutine is left once nothing waits")
}

// A batch never holds more than max calls; the rest wait for the next.
func TestBatchSizeIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	b := batcher.New(3, func(_ context.Context, reqs []int) ([]batcher.Result[int], error) {
		<-release
		mu.Lock()
		sizes = append(sizes, len(reqs))
		mu.Unlock()
		out := make([]batcher.Result[int], len(reqs))
		for i, r := range reqs {
			out[i].Value = r * 2
		}
		return out, nil
	})
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := b.Do(ctx, i)
			require.NoError(t, err)
			require.Equal(t, i*2, v)
		}()
	}
	require.Eventually(t, func() bool { return b.Waiting() >= 10-3 }, 10*time.Second, time.Millisecond, "all but the first batch wait")
	close(release)
	wg.Wait()
	total := 0
	for _, s := range sizes {
		require.LessOrEqual(t, s, 3)
		total += s
	}
	require.Equal(t, 10, total)
}

// A batch's error answers each of its calls; a per-call error answers its call only; a RunFunc
// that forgets a call answers it with an error, not a zero value.
func TestBatchErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	boom := errors.New("boom")
	b := batcher.New(10, func(_ context.Context, reqs []int) ([]batcher.Result[int], error) {
		switch reqs[0] {
		case -1:
			return nil, boom
		case -2:
			return nil, nil
		}
		return []batcher.Result[int]{{Err: fmt.Errorf("bad %d", reqs[0])}}, nil
	})
	_, err := b.Do(ctx, -1)
	require.ErrorIs(t, err, boom)
	_, err = b.Do(ctx, 5)
	require.EqualError(t, err, "bad 5")
	_, err = b.Do(ctx, -2)
	require.ErrorContains(t, err, "fewer results than calls")
}

// A call whose context ends returns at once with its cause; a call whose context ended before
// its batch started is left out of the batch; the batch's context outlives any one caller.
func TestCallerContexts(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	ran := make(chan []int, 10)
	b := batcher.New(10, func(ctx context.Context, reqs []int) ([]batcher.Result[int], error) {
		ran <- reqs
		<-release
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return make([]batcher.Result[int], len(reqs)), nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := b.Do(context.Background(), 1)
		done <- err
	}()
	require.Equal(t, []int{1}, <-ran)

	gone := errors.New("the caller left")
	ctx, cancel := context.WithCancelCause(context.Background())
	left := make(chan error, 1)
	go func() {
		_, err := b.Do(ctx, 2)
		left <- err
	}()
	stays := make(chan error, 1)
	go func() {
		_, err := b.Do(context.Background(), 3)
		stays <- err
	}()
	require.Eventually(t, func() bool { return b.Waiting() == 2 }, 10*time.Second, time.Millisecond)
	cancel(gone)
	require.ErrorIs(t, <-left, gone, "a caller whose context ends does not wait for its batch")
	close(release)
	require.NoError(t, <-done)
	require.Equal(t, []int{3}, <-ran, "the call whose context ended is not run")
	require.NoError(t, <-stays)
}

// A batch always has a deadline: the latest of its calls', or a minute when a call has none, so
// a batch that hangs does not hold the calls behind it for ever.
func TestBatchDeadline(t *testing.T) {
	t.Parallel()
	var got time.Time
	b := batcher.New(10, func(ctx context.Context, reqs []int) ([]batcher.Result[int], error) {
		d, ok := ctx.Deadline()
		if !ok {
			return nil, errors.New("no deadline")
		}
		got = d
		return make([]batcher.Result[int], len(reqs)), nil
	})
	before := time.Now()
	_, err := b.Do(context.Background(), 1)
	require.NoError(t, err)
	require.WithinRange(t, got, before.Add(59*time.Second), time.Now().Add(time.Minute))

	want := time.Now().Add(2 * time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), want)
	defer cancel()
	_, err = b.Do(ctx, 2)
	require.NoError(t, err)
	require.True(t, got.Equal(want), "a call's own deadline, even past a minute")
}
