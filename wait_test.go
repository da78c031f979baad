package taskorch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// Wait returns when the task reaches each terminal status, woken by the notification of the
// transaction that made it so: the client's safety re-check is set to an hour, so a Wait that
// returns was notified. Many waiters of one task, and of many tasks, share one connection.
func TestWaitWokenByNotify(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	taskorch.SetWaitRecheck(c, time.Hour)

	type result struct {
		task *taskorch.Task
		err  error
	}
	waitAll := func(ids []int64, perID int) <-chan result {
		out := make(chan result, len(ids)*perID)
		for _, id := range ids {
			for range perID {
				go func() {
					tk, err := c.Wait(ctx, id)
					out <- result{tk, err}
				}()
			}
		}
		return out
	}
	watched := func(n int) { // the waiters are registered: transitions from now on notify them
		t.Helper()
		require.Eventually(t, func() bool {
			return scalar[int](t, pool, `select count(*)::int from queues.task_waiter`) == n
		}, 20*time.Second, 2*time.Millisecond)
	}

	// cancelled, by an operator.
	cancelled, err := c.Enqueue(ctx, raw("nobody_runs_this", `{}`), nil)
	require.NoError(t, err)
	got := waitAll([]int64{cancelled.TaskID}, 3)
	watched(1)
	_, err = c.Cancel(ctx, cancelled.TaskID)
	require.NoError(t, err)
	for range 3 {
		r := <-got
		require.NoError(t, r.err)
		require.Equal(t, taskorch.StatusCancelled, r.task.Status)
	}
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from queues.task_waiter`), "the waiter row goes with the transition")

	// failed, dead and completed, by a worker; 50 tasks completed in batches.
	res, err := c.EnqueueMany(ctx, []taskorch.EnqueueParams{{Args: raw("discard", `{}`)},
		{Args: raw("boom", `{}`), Opts: &taskorch.EnqueueOpts{MaxAttempts: 1}}})
	require.NoError(t, err)
	batch := make([]taskorch.EnqueueParams, 50)
	for i := range batch {
		batch[i] = taskorch.EnqueueParams{Args: raw("ok", `{}`)}
	}
	oks, err := c.EnqueueMany(ctx, batch)
	require.NoError(t, err)
	ids := []int64{res[0].TaskID, res[1].TaskID}
	for _, r := range oks {
		ids = append(ids, r.TaskID)
	}
	got = waitAll(ids, 1)
	watched(len(ids))

	hs := taskorch.NewHandlers()
	hs.HandleFunc("discard", func(context.Context, *taskorch.Task) error { return taskorch.Discard(errors.New("bad input")) })
	hs.HandleFunc("boom", func(context.Context, *taskorch.Task) error { return errors.New("boom") })
	hs.HandleFunc("ok", func(ctx context.Context, tk *taskorch.Task) error { return taskorch.SetResult(ctx, tk.ID) })
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Concurrency: 20})
	byStatus := map[taskorch.Status]int{}
	for range ids {
		r := <-got
		require.NoError(t, r.err)
		byStatus[r.task.Status]++
		if r.task.Status == taskorch.StatusCompleted {
			require.JSONEq(t, scalar[string](t, pool, `select task_id::text from queues.task where task_id = $1`, r.task.ID), string(r.task.Result))
		}
	}
	require.Equal(t, map[taskorch.Status]int{taskorch.StatusFailed: 1, taskorch.StatusDead: 1, taskorch.StatusCompleted: 50}, byStatus)

	// A finished task is returned at once, with no waiter registered.
	tk, err := c.Wait(ctx, oks[0].TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusCompleted, tk.Status)
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from queues.task_waiter`))
}

// Without notifications (none are sent: the waiter rows are deleted behind the trigger's back),
// the safety re-check still finds the finished task.
func TestWaitRecheckWithoutNotify(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	taskorch.SetWaitRecheck(c, 50*time.Millisecond)
	res, err := c.Enqueue(ctx, raw("x", `{}`), nil)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := c.Wait(ctx, res.TaskID)
		done <- err
	}()
	require.Eventually(t, func() bool {
		return scalar[int](t, pool, `select count(*)::int from queues.task_waiter`) == 1
	}, 20*time.Second, 2*time.Millisecond)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	mustExec(t, tx, `alter table queues.task disable trigger task_done_notify`)
	mustExec(t, tx, `select queues.cancel_task($1)`, res.TaskID)
	mustExec(t, tx, `alter table queues.task enable trigger task_done_notify`)
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-done)
}

// Bad input: a missing id is ErrNotFound at once; a cancelled or expired context returns its
// error, and waiting changes nothing in the task.
func TestWaitBadInput(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	taskorch.SetWaitRecheck(c, time.Hour)

	start := time.Now()
	_, err := c.Wait(ctx, 987654321)
	require.ErrorIs(t, err, taskorch.ErrNotFound)
	require.EqualError(t, err, "wait for task 987654321: taskorch: task not found")
	for _, id := range []int64{0, -1} {
		_, err = c.Wait(ctx, id)
		require.ErrorIs(t, err, taskorch.ErrNotFound)
	}
	require.Less(t, time.Since(start), 10*time.Second, "not found at once, not after a re-check")

	res, err := c.Enqueue(ctx, raw("never_runs", `{}`), nil)
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Wait(cctx, res.TaskID)
		done <- err
	}()
	require.Eventually(t, func() bool {
		return scalar[int](t, pool, `select count(*)::int from queues.task_waiter`) == 1
	}, 20*time.Second, 2*time.Millisecond)
	cancel()
	err = <-done
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "wait for task")

	dctx, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	_, err = c.Wait(dctx, res.TaskID)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// Already cancelled: the context's error, before anything is read.
	_, err = c.Wait(cctx, res.TaskID)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, "pending", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, res.TaskID), "waiting changes nothing")
}

// Many Waits share one listener and leave no waiter behind. Without lingering the listener stops
// with the last Wait, and the next Wait starts a new one; with it, the listener stays for the
// next Wait and then stops on its own.
func TestWaitListenerRestarts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, _ := newClient(t)
	taskorch.SetWaitRecheck(c, time.Hour)
	taskorch.SetWaitLinger(c, 0)
	for round := range 4 {
		if round == 2 {
			taskorch.SetWaitLinger(c, 100*time.Millisecond)
		}
		res, err := c.Enqueue(ctx, raw("r", `{}`), nil)
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make(chan error, 10)
		for range 10 {
			wg.Go(func() {
				_, err := c.Wait(ctx, res.TaskID)
				errs <- err
			})
		}
		// Cancel the task once all 10 are listening: at least one is registered in the
		// database, and the others use the same listener.
		require.Eventually(t, func() bool { return taskorch.WaitersOf(c) == 10 }, 20*time.Second, 2*time.Millisecond, "round %d", round)
		_, err = c.Cancel(ctx, res.TaskID)
		require.NoError(t, err)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Zero(t, taskorch.WaitersOf(c))
		if round < 2 {
			require.False(t, taskorch.WaitListening(c), "round %d: the listener stopped with the last Wait", round)
		}
	}
	require.Eventually(t, func() bool { return !taskorch.WaitListening(c) }, 20*time.Second, 5*time.Millisecond,
		"the lingering listener stops")
}
