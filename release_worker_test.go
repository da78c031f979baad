package taskorch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// queues.release_worker_tasks gives back every task running under one worker's leases, as
// release_tasks does for listed leases: pending and due now, the attempt not spent, a
// 'released' event each. Other workers' tasks and finished tasks are left alone. The worker
// role may call it.
func TestReleaseWorkerTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDB(t)
	mustExec(t, pool, `select queues.enqueue_many(array_fill('r'::text, array[6]), array_fill('{}'::jsonb, array[6]))`)

	a := claim(t, pool, "worker-a", 3, "5 minutes")
	b := claim(t, pool, "worker-b", 2, "5 minutes")
	require.Len(t, a, 3)
	require.Len(t, b, 2)
	// One of A's tasks completes: finished tasks are not A's to give back.
	done := a[2]
	require.True(t, scalar[bool](t, pool, `select queues.complete_task($1, $2)`, done.TaskID, done.LeaseID))
	running := []int64{a[0].TaskID, a[1].TaskID}
	bLeases := scalar[[]int64](t, pool, `select array_agg(lease_id order by task_id) from queues.task where worker_id = 'worker-b'`)

	// As the worker role, in a transaction of its own.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	mustExec(t, tx, `set local role worker_service_user`)
	released := scalar[[]int64](t, tx,
		`select coalesce(array_agg(id order by id), '{}') from queues.release_worker_tasks('worker-a', 'draining') as r(id)`)
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, running, released)

	for _, c := range a[:2] {
		var status, worker string
		var attempt int
		var leaseID int64
		var due, leased bool
		require.NoError(t, pool.QueryRow(ctx, `select status::text, attempt, lease_id, worker_id,
				run_at <= now(), lease_expires_at is not null
			from queues.task where task_id = $1`, c.TaskID).Scan(&status, &attempt, &leaseID, &worker, &due, &leased))
		require.Equal(t, "pending", status, "task %d", c.TaskID)
		require.Equal(t, 0, attempt, "the released attempt is not spent (task %d)", c.TaskID)
		require.Equal(t, c.LeaseID, leaseID, "the last lease stays recorded")
		require.True(t, due)
		require.False(t, leased)

		var event, detail, from, to string
		var evLease int64
		var evAttempt int
		require.NoError(t, pool.QueryRow(ctx, `select event, detail, from_status::text, to_status::text, lease_id, attempt, worker_id
			from queues.task_event where task_id = $1 order by task_event_id desc limit 1`, c.TaskID).
			Scan(&event, &detail, &from, &to, &evLease, &evAttempt, &worker))
		require.Equal(t, []any{"released", "draining", "running", "pending", c.LeaseID, 1, "worker-a"},
			[]any{event, detail, from, to, evLease, evAttempt, worker})
	}

	// B's tasks run on under their leases; A's completed task stays completed.
	require.Equal(t, 2, scalar[int](t, pool,
		`select count(*)::int from queues.task where worker_id = 'worker-b' and status = 'running' and lease_expires_at is not null`))
	require.Equal(t, bLeases, scalar[[]int64](t, pool,
		`select array_agg(lease_id order by task_id) from queues.task where worker_id = 'worker-b'`))
	require.Equal(t, "completed", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, done.TaskID))
	require.Equal(t, 0, scalar[int](t, pool,
		`select count(*)::int from queues.task_event where event = 'released' and task_id <> all ($1)`, running))

	// Nothing left to give back; a worker with no tasks gets nothing.
	require.Empty(t, scalar[[]int64](t, pool, `select coalesce(array_agg(id), '{}') from queues.release_worker_tasks('worker-a') as r(id)`))
	require.Empty(t, scalar[[]int64](t, pool, `select coalesce(array_agg(id), '{}') from queues.release_worker_tasks('nobody') as r(id)`))

	// Claimed again, a released task is on its first attempt again, under a new lease.
	again := claim(t, pool, "worker-c", 10, "5 minutes")
	require.Len(t, again, 3) // the two released and the one never claimed
	for _, c := range again {
		require.Equal(t, 1, c.Attempt)
	}
	require.NotContains(t, []int64{again[0].LeaseID, again[1].LeaseID, again[2].LeaseID}, a[0].LeaseID)

	// Granted to the worker role only: not to PUBLIC.
	require.False(t, scalar[bool](t, pool, `select exists (
		select from pg_proc p, aclexplode(p.proacl) acl
		where p.oid = 'queues.release_worker_tasks(text, text)'::regprocedure and acl.grantee = 0)`))
}
