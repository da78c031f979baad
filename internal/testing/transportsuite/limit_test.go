package transportsuite_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/dispatch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// Under a transport, tasks of limited types are not sent as messages: the worker claims them
// from the database within their limits, alongside the tasks its transport delivers.
func TestLimitUnderTransport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rig, _ := redisRig(t, dispatch.FaultConfig{})
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 16})
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "lim.t", MaxRunning: 2}))

	var running, peak atomic.Int32
	hs := taskorch.NewHandlers()
	hs.HandleFunc("lim.t", func(context.Context, *taskorch.Task) error {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		running.Add(-1)
		return nil
	})
	hs.HandleFunc("free.t", func(context.Context, *taskorch.Task) error { return nil })
	transportWorker(t, pool, rig, "lim-transport-1", taskorch.WorkerConfig{Handlers: hs, Concurrency: 8})
	transportWorker(t, pool, rig, "lim-transport-2", taskorch.WorkerConfig{Handlers: hs, Concurrency: 8})

	mustExec(t, pool, `select queues.enqueue('lim.t', '{}') from generate_series(1, 30)`)
	mustExec(t, pool, `select queues.enqueue('free.t', '{}') from generate_series(1, 30)`)
	require.Eventually(t, func() bool {
		return scalar[int64](t, pool, `select count(*) from queues.task where status = 'completed'`) == 60
	}, 60*time.Second, 20*time.Millisecond)
	require.LessOrEqual(t, peak.Load(), int32(2), "never more than the limit running")
	require.Equal(t, int64(0), scalar[int64](t, pool, `select count(*) from queues.task where task_type = 'lim.t' and dispatched_at is not null`),
		"limited tasks are not sent as messages")
	require.Equal(t, int64(30), scalar[int64](t, pool, `select count(*) from queues.task where task_type = 'free.t' and dispatched_at is not null`),
		"the others are")
}
