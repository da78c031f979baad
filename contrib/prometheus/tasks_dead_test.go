package prometheus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	taskorchprom "github.com/taskorch/taskorch/contrib/prometheus"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// Tasks that go dead with no worker to record it, their lease expired on their last attempt or
// their worker found dead by the leader's reaper, are counted once by the leader in
// taskorch_tasks_failed_total{outcome="dead"}, as the worker counts those it fails itself.
func TestTasksDeadWithoutWorkerCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	reg := prometheus.NewRegistry()
	hs := taskorch.NewHandlers()
	hs.HandleFunc("ok", func(context.Context, *taskorch.Task) error { return nil })
	startWorker(t, pool, &taskorch.WorkerConfig{
		Handlers: hs, Observers: []taskorch.Observer{taskorchprom.New(reg)}, QueueStatsInterval: 20 * time.Millisecond,
	})

	enq := func(typ string) int64 {
		res, err := c.Enqueue(ctx, raw(typ, `{}`), &taskorch.EnqueueOpts{MaxAttempts: 1})
		require.NoError(t, err)
		return res.TaskID
	}
	// A worker that claimed a task and vanished: its lease expires on the task's only attempt.
	expired := enq("expires")
	require.Equal(t, expired, scalar[int64](t, pool,
		`select task_id from queues.claim_tasks('vanished', 1, interval '200 milliseconds', '{expires}')`))
	// A registered worker that stopped heartbeating with a task running under a long lease: the
	// leader reaps it and its task, on its only attempt, goes dead.
	reaped := enq("reaped")
	mustExec(t, pool, `select queues.register_worker('silent', 'host')`)
	require.Equal(t, reaped, scalar[int64](t, pool,
		`select task_id from queues.claim_tasks('silent', 1, interval '1 hour', '{reaped}')`))
	mustExec(t, pool, `update queues.worker set last_heartbeat = now() - interval '1 hour' where worker_id = 'silent'`)

	waitStatus(t, pool, expired, taskorch.StatusDead)
	waitStatus(t, pool, reaped, taskorch.StatusDead)
	require.Eventually(t, func() bool {
		got := gather(t, reg)
		return got[`taskorch_tasks_failed_total{outcome="dead",task_type="expires"}`] == 1 &&
			got[`taskorch_tasks_failed_total{outcome="dead",task_type="reaped"}`] == 1
	}, 20*time.Second, 10*time.Millisecond, "the leader counts both")
	// Reported once: the tally says so, and nothing is left to take.
	require.Equal(t, "expires 1/1 reaped 1/1", scalar[string](t, pool,
		`select string_agg(format('%s %s/%s', task_type, dead, reported), ' ' order by task_type) from queues.task_dead_tally`))
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from queues.take_dead_tally()`))
	got := gather(t, reg)
	require.Equal(t, 1.0, got[`taskorch_tasks_failed_total{outcome="dead",task_type="expires"}`])
	require.Equal(t, 1.0, got[`taskorch_tasks_failed_total{outcome="dead",task_type="reaped"}`])
}

// queues.take_dead_tally() hands each tally once, whichever caller takes it; the worker role may
// call it and queues.health_stats(), which reports the paused queues and the default history
// partition's rows, and refuses a bad window or cap with invalid_parameter_value.
func TestDeadTallyAndHealthStats(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	mustExec(t, tx, `insert into queues.task_dead_tally (task_type, dead) values ('a', 3), ('b', 1)`)
	mustExec(t, tx, `select queues.pause_queue('held')`)
	mustExec(t, tx, `set local role worker_service_user`)
	take := func() string {
		return scalar[string](t, tx, `select coalesce(string_agg(format('%s=%s', task_type, dead), ' ' order by task_type), '') from queues.take_dead_tally()`)
	}
	require.Equal(t, "a=3 b=1", take())
	require.Empty(t, take(), "taken once")
	mustExec(t, tx, `reset role`)
	mustExec(t, tx, `update queues.task_dead_tally set dead = dead + 2 where task_type = 'a'`)
	mustExec(t, tx, `set local role worker_service_user`)
	require.Equal(t, "a=2", take(), "only what was added since")

	// The recovery a takeover and the session reaper share counts the tasks it makes dead, not
	// those it returns to pending.
	mustExec(t, tx, `reset role`)
	mustExec(t, tx, `select queues.enqueue('r', '{}', _max_attempts => 1)`)
	mustExec(t, tx, `select queues.enqueue('r', '{}', _max_attempts => 2)`)
	mustExec(t, tx, `select count(*) from queues.claim_tasks('restarted', 2, interval '1 hour', '{r}')`)
	require.Equal(t, "dead pending", scalar[string](t, tx,
		`select string_agg(status::text, ' ' order by status::text) from internal.recover_worker_tasks('{restarted}', '%s %s %s %s', '{}')`))
	mustExec(t, tx, `set local role worker_service_user`)
	require.Equal(t, "r=1", take())

	require.Equal(t, "default_partition_rows= 0 queue_paused=held 1", scalar[string](t, tx,
		`select string_agg(format('%s=%s %s', metric, label, value), ' ' order by metric, label) from queues.health_stats()`))
	for _, bad := range []string{
		`select * from queues.health_stats(interval '0')`,
		`select * from queues.health_stats(interval '8 days')`,
		`select * from queues.health_stats(null)`,
		`select * from queues.health_stats(interval '1 hour', 0)`,
	} {
		_, err := tx.Exec(context.Background(), `savepoint bad`)
		require.NoError(t, err)
		_, err = tx.Exec(context.Background(), bad)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s: %v", bad, err)
		require.Equal(t, "22023", pgErr.Code, bad)
		_, err = tx.Exec(context.Background(), `rollback to savepoint bad`)
		require.NoError(t, err)
	}
}
