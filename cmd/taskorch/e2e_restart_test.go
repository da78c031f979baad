package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/pgcluster"
)

// PostgreSQL restarted under a running worker: the worker reconnects and goes on; no task is
// lost and each is completed once.
func TestE2EDatabaseRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := privateClusterConfig(t)
	cluster, err := pgcluster.Start(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cluster.Stop(context.Background()) })
	url := cluster.URL("postgres")

	pool := openPool(t, url)
	_, err = taskorch.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	startWorkerProc(t, url, "TASKORCH_CONCURRENCY=8")
	for range 40 {
		enqueue(t, pool, "taskorch.sleep", `{"ms": 200}`, 0) // ~1s of work for 8 slots
	}
	waitFor(t, pool, "work under way", `select count(*) >= 5 from queues.task where status = 'completed'`)
	require.Less(t, q[int64](t, pool, `select count(*) from queues.task where status = 'completed'`), int64(40),
		"the restart must come while tasks are in flight")

	require.NoError(t, cluster.Stop(ctx))
	cluster, err = pgcluster.Start(ctx, cfg)
	require.NoError(t, err)

	// The pool reconnects too; enqueue more after the restart.
	require.Eventually(t, func() bool { return pool.Ping(ctx) == nil }, 30*time.Second, 50*time.Millisecond)
	for range 40 {
		enqueue(t, pool, "taskorch.sleep", `{"ms": 20}`, 0)
	}
	waitFor(t, pool, "every task completed", `select count(*) = 80 from queues.task where status = 'completed'`)
}
