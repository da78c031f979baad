package admin

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// ListWorkers shows the registry oldest first, with what each worker registered, which one holds
// the leader lease and how many tasks each runs.
func TestListWorkers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)

	workers, err := ListWorkers(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, workers)

	_, err = pool.Exec(ctx, `select queues.register_worker('w-old', 'h1', 11, 8, 'v1', 'redis', array['a', 'b'])`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `update queues.worker set started_at = now() - interval '1 hour' where worker_id = 'w-old'`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `select queues.register_worker('w-new', 'h2', 22, 4)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `select queues.acquire_leadership('w-new', interval '1 hour')`)
	require.NoError(t, err)
	for range 2 {
		_, err = pool.Exec(ctx, `select queues.enqueue('a', '{}')`)
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, `select * from queues.claim_tasks('w-old', 10)`)
	require.NoError(t, err)

	workers, err = ListWorkers(ctx, pool)
	require.NoError(t, err)
	require.Len(t, workers, 2)
	old, young := workers[0], workers[1]
	require.Equal(t, "w-old", old.ID)
	require.Equal(t, "h1", old.Hostname)
	require.Equal(t, 11, old.PID)
	require.Equal(t, 8, old.PoolSize)
	require.Equal(t, "v1", old.Version)
	require.Equal(t, "redis", old.Transport)
	require.Equal(t, []string{"a", "b"}, old.TaskTypes)
	require.False(t, old.Leader)
	require.Equal(t, 2, old.RunningTasks)
	require.False(t, old.LastHeartbeat.Before(old.StartedAt))

	require.Equal(t, "w-new", young.ID)
	require.Empty(t, young.Version)
	require.Nil(t, young.TaskTypes, "all types")
	require.True(t, young.Leader)
	require.Zero(t, young.RunningTasks)
}
