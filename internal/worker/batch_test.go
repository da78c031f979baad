package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/tasktype"
)

// fakeBatch is a BatchHandler whose WorkBatch is fn.
type fakeBatch struct {
	fn func(ctx context.Context, tasks []*tasktype.Task) []error
}

func (f fakeBatch) Work(ctx context.Context, t *tasktype.Task) error {
	return f.fn(ctx, []*tasktype.Task{t})[0]
}
func (f fakeBatch) BatchLimits() (int, time.Duration) { return 10, 0 }
func (f fakeBatch) WorkBatch(ctx context.Context, tasks []*tasktype.Task, _ []*ResultSlot) []error {
	return f.fn(ctx, tasks)
}

// runBatch starts n tasks in a closed batch of h, each joining from its own goroutine with a
// context of its own (ctxs[i], or a fresh one), and returns what each join returned, by task.
func runBatch(t *testing.T, h BatchHandler, n int, ctxs map[int]context.Context) []error {
	t.Helper()
	b := &batchCall{h: h, typ: "t", maxSize: 10, inner: context.Background()}
	out := make([]error, n)
	done := make(chan int, n)
	for i := range n {
		require.True(t, b.tryAdd())
		r := &runningTask{task: &tasktype.Task{ID: int64(i + 1), Type: "t"}, batch: b}
		ctx := ctxs[i]
		if ctx == nil {
			ctx = context.Background()
		}
		go func() {
			out[i] = b.join(ctx, r)
			done <- i
		}()
	}
	b.mu.Lock()
	b.closed = true
	b.fireLocked()
	b.mu.Unlock()
	for range n {
		<-done
	}
	return out
}

// Each task gets the error the handler returned for it; the call has the tasks in claim order.
func TestBatchCallHandsEachTaskItsError(t *testing.T) {
	t.Parallel()
	errOdd := errors.New("odd")
	out := runBatch(t, fakeBatch{fn: func(_ context.Context, tasks []*tasktype.Task) []error {
		errs := make([]error, len(tasks))
		for i, task := range tasks {
			if task.ID != int64(i+1) {
				errs[i] = errors.New("not in claim order")
				continue
			}
			if task.ID%2 == 1 {
				errs[i] = errOdd
			}
		}
		return errs
	}}, 4, nil)
	require.Equal(t, []error{errOdd, nil, errOdd, nil}, out)
}

// A handler that returns another number of errors than tasks, or panics, fails every task of
// the call with an error that says so.
func TestBatchCallBadReturns(t *testing.T) {
	t.Parallel()
	out := runBatch(t, fakeBatch{fn: func(context.Context, []*tasktype.Task) []error { return []error{nil} }}, 3, nil)
	for _, err := range out {
		require.EqualError(t, err, `the batch handler of "t" returned 1 errors for a batch of 3 tasks; it must return one per task, in order: every task of the batch fails`)
	}
	out = runBatch(t, fakeBatch{fn: func(context.Context, []*tasktype.Task) []error { panic("boom") }}, 2, nil)
	for _, err := range out {
		require.ErrorContains(t, err, "handler panicked: boom (batch of 2 tasks: every task of the batch fails)")
	}
}

// A task stopped before the call is left out of it and gets its context's cause; the call's
// context is cancelled only once every task in it is stopped, with the cause of one of them.
func TestBatchCallContext(t *testing.T) {
	t.Parallel()
	stoppedEarly, cancelEarly := context.WithCancelCause(context.Background())
	cancelEarly(tasktype.ErrTaskCancelled)
	a, cancelA := context.WithCancelCause(context.Background())
	bctx, cancelB := context.WithCancelCause(context.Background())
	var ids []int64
	var afterOne, cause error
	out := runBatch(t, fakeBatch{fn: func(ctx context.Context, tasks []*tasktype.Task) []error {
		for _, task := range tasks {
			ids = append(ids, task.ID)
		}
		cancelA(tasktype.ErrLeaseLost)
		<-a.Done()
		afterOne = ctx.Err()
		cancelB(tasktype.ErrShutdown)
		<-ctx.Done()
		cause = context.Cause(ctx)
		return make([]error, len(tasks))
	}}, 3, map[int]context.Context{0: stoppedEarly, 1: a, 2: bctx})
	require.Equal(t, []int64{2, 3}, ids, "the stopped task is left out")
	require.NoError(t, afterOne, "one task's loss does not cancel the call")
	require.True(t, errors.Is(cause, tasktype.ErrShutdown) || errors.Is(cause, tasktype.ErrLeaseLost),
		"every task stopped: the call's context ends with one of their causes, got %v", cause)
	require.ErrorIs(t, out[0], tasktype.ErrTaskCancelled)
	require.Equal(t, []error{nil, nil}, out[1:])
}

// A task that ends without reaching the handler settles its batch: the call is made for the
// others.
func TestBatchCallLeave(t *testing.T) {
	t.Parallel()
	b := &batchCall{h: fakeBatch{fn: func(_ context.Context, tasks []*tasktype.Task) []error {
		return make([]error, len(tasks))
	}}, typ: "t", maxSize: 2, inner: context.Background()}
	require.True(t, b.tryAdd())
	require.True(t, b.tryAdd())
	require.False(t, b.tryAdd(), "full")
	gone := &runningTask{task: &tasktype.Task{ID: 1}, batch: b}
	stays := &runningTask{task: &tasktype.Task{ID: 2}, batch: b}
	b.leave(gone)
	require.NoError(t, b.join(context.Background(), stays))
	b.leave(stays) // joined already: nothing
	require.Equal(t, 2, b.settled)
}
