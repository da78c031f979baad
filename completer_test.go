package taskorch_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// A worker writes two batches of completions at once (docs/worker.md, "Record"): while one
// batch's statement waits (here on a row lock another session holds on its task; in real work,
// a completion that releases a workflow's children), the tasks that finish meanwhile are
// written by the other, and the waiting one is written once the lock goes, even when the worker
// is told to stop while it waits.
func TestCompletionsWrittenBesideAWaitingBatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, pool := newClient(t)
	started, finish := make(chan struct{}), make(chan struct{})
	hs := taskorch.NewHandlers()
	hs.HandleFunc("held", func(context.Context, *taskorch.Task) error {
		close(started)
		<-finish
		return nil
	})
	hs.HandleFunc("free", func(context.Context, *taskorch.Task) error { return nil })
	_, stop := startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Concurrency: 4})

	held := scalar[int64](t, pool, `select queues.enqueue('held', '{}')`)
	<-started
	// Another session locks the task's row, so its completion's statement waits for it.
	locker, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	defer func() { _ = locker.Close(context.WithoutCancel(ctx)) }()
	tx, err := locker.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	mustExec(t, tx, `select from queues.task where task_id = $1 for update`, held)
	close(finish)
	require.Eventually(t, func() bool {
		return scalar[bool](t, pool, `select exists (select from pg_stat_activity
			where datname = current_database() and wait_event_type = 'Lock' and query like '%complete_tasks_with_results%')`)
	}, 20*time.Second, 5*time.Millisecond, "the held task's completion never waited on the lock")

	// Tasks that finish now are completed while that statement still waits.
	free := make([]int64, 3)
	for i := range free {
		free[i] = scalar[int64](t, pool, `select queues.enqueue('free', '{}')`)
		waitStatus(t, pool, free[i], taskorch.StatusCompleted)
	}
	require.Equal(t, "running", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, held))

	// The worker is stopped while that completion still waits: its stop waits for the queue to
	// drain, and the held task is completed once, not given back or stranded running.
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	require.NoError(t, tx.Rollback(ctx))
	<-stopped
	waitStatus(t, pool, held, taskorch.StatusCompleted)
	require.Equal(t, 1, scalar[int](t, pool, `select attempt from queues.task where task_id = $1`, held), "claimed once")
}
