package maintenance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// A worker that stopped heartbeating is deleted by the leader and its running tasks go back to
// pending (dead on their last attempt), each with a 'recovered' event and an error row; a live
// worker's tasks are untouched; the dead worker's late outcomes are refused.
func TestReapDeadWorker(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)

	mustExec(t, pool, `select queues.register_worker('ghost', 'h1', 1, 4)`)
	mustExec(t, pool, `select queues.register_worker('live', 'h2', 2, 4)`)
	mustExec(t, pool, `update queues.worker set last_heartbeat = now() - interval '1 hour' where worker_id = 'ghost'`)
	mustExec(t, pool, `select queues.enqueue('g', '{"n": 1}')`)
	mustExec(t, pool, `select queues.enqueue('g', '{"n": 2}')`)
	lastAttempt := scalar[int64](t, pool, `select queues.enqueue('g', '{"n": 3}', _max_attempts => 1)`)
	liveTask := scalar[int64](t, pool, `select queues.enqueue('l', '{}')`)
	type lease struct{ task, lease int64 }
	claim := func(worker, typ string) []lease {
		rows, err := pool.Query(ctx, `select task_id, lease_id from queues.claim_tasks($1, 10, interval '5 minutes', array[$2])`, worker, typ)
		require.NoError(t, err)
		defer rows.Close()
		var out []lease
		for rows.Next() {
			var l lease
			require.NoError(t, rows.Scan(&l.task, &l.lease))
			out = append(out, l)
		}
		require.NoError(t, rows.Err())
		return out
	}
	ghostLeases := claim("ghost", "g")
	require.Len(t, ghostLeases, 3)
	liveLeases := claim("live", "l")
	require.Len(t, liveLeases, 1)

	ev := newEvents()
	start(t, pool, testConfig("leader", ev))
	_, e := ev.wait(t, "reaped", func(_ string, e Event) bool { return e.Kind == EventReaped && len(e.Workers) > 0 })
	require.Len(t, e.Workers, 1)
	require.Equal(t, "ghost", e.Workers[0].WorkerID)
	require.Equal(t, 3, e.Workers[0].TasksRecovered)
	require.Equal(t, 1, e.Workers[0].TasksDead)
	require.Equal(t, 3, e.Tasks)

	require.Equal(t, []string{"leader", "live"},
		scalar[[]string](t, pool, `select array_agg(worker_id order by worker_id) from queues.worker`),
		"the dead worker is gone, the live one stays")

	for _, l := range ghostLeases {
		want := "pending"
		if l.task == lastAttempt {
			want = "dead"
		}
		var status, lastError string
		var expires *time.Time
		require.NoError(t, pool.QueryRow(ctx, `select status::text, lease_expires_at, last_error from queues.task where task_id = $1`,
			l.task).Scan(&status, &expires, &lastError))
		require.Equal(t, want, status)
		require.Nil(t, expires)
		require.Contains(t, lastError, "worker ghost stopped heartbeating")

		var event, fromStatus, toStatus, worker string
		var eventLease int64
		require.NoError(t, pool.QueryRow(ctx, `select event, from_status::text, to_status::text, worker_id, lease_id
			from queues.task_event where task_id = $1 order by task_event_id desc limit 1`, l.task).
			Scan(&event, &fromStatus, &toStatus, &worker, &eventLease))
		require.Equal(t, []string{"recovered", "running", want, "ghost"}, []string{event, fromStatus, toStatus, worker})
		require.Equal(t, l.lease, eventLease)

		var msg string
		var errCtx map[string]any
		require.NoError(t, pool.QueryRow(ctx, `select error_message, context from queues.error
			where task_id = $1 and context->>'operation' = 'recovered'`, l.task).Scan(&msg, &errCtx))
		require.Contains(t, msg, "last heartbeat")
		require.Equal(t, "ghost", errCtx["worker_id"])
		require.NotEmpty(t, errCtx["last_heartbeat"])
		require.Equal(t, want, errCtx["outcome"])

		// The dead worker's late outcomes are refused under the recovered lease.
		require.False(t, scalar[bool](t, pool, `select queues.complete_task($1, $2)`, l.task, l.lease))
		require.Nil(t, scalar[*string](t, pool, `select queues.fail_task($1, 'late', $2)::text`, l.task, l.lease))
		require.Equal(t, want, scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, l.task))
	}
	require.Equal(t, 3, scalar[int](t, pool, `select count(*) from queues.error
		where context->>'operation' = 'complete' and error_message like 'completion refused%'`))

	// The live worker's task is untouched and completes normally.
	require.Equal(t, "running", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, liveTask))
	require.True(t, scalar[bool](t, pool, `select queues.complete_task($1, $2)`, liveTask, liveLeases[0].lease))

	// The dead worker learns it was reaped at its next heartbeat.
	require.False(t, scalar[bool](t, pool, `select queues.heartbeat_worker('ghost')`))
}

// The reaper never removes the leader itself, and skips task rows another transaction holds
// (their lease expiry rescues them) while still removing the worker.
func TestReapSkipsLeaderAndLockedTasks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	term := lead(t, pool, "boss")
	mustExec(t, pool, `select queues.register_worker('boss', 'h')`)
	mustExec(t, pool, `select queues.register_worker('ghost', 'h')`)
	mustExec(t, pool, `update queues.worker set last_heartbeat = now() - interval '1 hour'`)
	mustExec(t, pool, `select queues.enqueue('g', '{}') from generate_series(1, 2)`)
	locked := scalar[int64](t, pool, `select min(task_id) from queues.claim_tasks('ghost', 2)`)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `select from queues.task where task_id = $1 for update`, locked)
	require.NoError(t, err)

	reaped, err := ReapDeadWorkers(ctx, pool, time.Minute, term)
	require.NoError(t, err)
	require.Len(t, reaped, 1)
	require.Equal(t, "ghost", reaped[0].WorkerID)
	require.Equal(t, 1, reaped[0].TasksRecovered)
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, "running", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, locked))
	require.Equal(t, []string{"boss"}, scalar[[]string](t, pool, `select array_agg(worker_id) from queues.worker`))
}
