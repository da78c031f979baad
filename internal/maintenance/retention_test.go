package maintenance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// The leader prunes finished tasks past their retention (completed and cancelled after
// Retention, failed and dead after FailedRetention) with their errors, and keeps everything
// else. Their leases and events stay: they go with their day partitions (history_test.go).
func TestRetentionPrunesOldFinishedTasks(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)

	// finish walks a new task to status, then backdates its finish by age.
	finish := func(status string, age time.Duration) int64 {
		t.Helper()
		id := scalar[int64](t, pool, `select queues.enqueue('t', '{}', _max_attempts => 1)`)
		lease := scalar[int64](t, pool, `select lease_id from queues.claim_tasks('w', 1)`)
		switch status {
		case "completed":
			mustExec(t, pool, `select queues.complete_task($1, $2)`, id, lease)
		case "failed":
			mustExec(t, pool, `select queues.fail_task($1, 'bad', $2, false)`, id, lease)
		case "dead":
			mustExec(t, pool, `select queues.fail_task($1, 'boom', $2)`, id, lease)
		case "cancelled":
			mustExec(t, pool, `select queues.cancel_task($1)`, id)
		case "running":
		}
		col := map[string]string{"completed": "completed_at", "failed": "failed_at", "dead": "dead_at",
			"cancelled": "cancelled_at", "running": "claimed_at"}[status]
		mustExec(t, pool, `update queues.task set `+col+` = now() - $2::interval where task_id = $1`, id, age)
		return id
	}
	hour := time.Hour
	pruned := []int64{
		finish("completed", 2*hour),
		finish("cancelled", 2*hour),
		finish("dead", 3*hour),
		finish("failed", 3*hour),
	}
	kept := []int64{
		finish("completed", 10*time.Minute),
		finish("cancelled", 10*time.Minute),
		finish("failed", 90*time.Minute), // failed and dead are kept longer
		finish("dead", 90*time.Minute),
		finish("running", 5*hour),
	}
	// Dead three hours ago, retried by hand and completed now: it finished now.
	retried := finish("dead", 3*hour)
	mustExec(t, pool, `select queues.retry_task($1)`, retried)
	lease := scalar[int64](t, pool, `select lease_id from queues.claim_tasks('w', 1)`)
	mustExec(t, pool, `select queues.complete_task($1, $2)`, retried, lease)
	kept = append(kept, retried,
		scalar[int64](t, pool, `select queues.enqueue('t', '{}', now() - interval '5 hours')`)) // pending
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.task where status = 'pending'`))

	ev := newEvents()
	cfg := testConfig("leader", ev)
	cfg.Retention = hour
	cfg.FailedRetention = 2 * hour
	start(t, pool, cfg)
	_, e := ev.wait(t, "pruned", func(_ string, e Event) bool { return e.Kind == EventPruned && e.Tasks > 0 })
	require.Equal(t, len(pruned), e.Tasks)

	for _, table := range []string{"queues.task", "queues.error"} {
		require.Zero(t, scalar[int](t, pool, `select count(*) from `+table+` where task_id = any($1)`, pruned), table)
	}
	require.Equal(t, len(pruned), scalar[int](t, pool, `select count(distinct task_id) from queues.task_lease where task_id = any($1)`, pruned),
		"leases stay until their day partition is dropped")
	require.Equal(t, len(kept), scalar[int](t, pool, `select count(*) from queues.task where task_id = any($1)`, kept))
	require.Equal(t, len(kept)-1, scalar[int](t, pool, `select count(distinct task_id) from queues.task_history where task_id = any($1)`, kept),
		"the history of all but the pending task (enqueue writes none)")
	require.Positive(t, scalar[int](t, pool, `select count(*) from queues.error where task_id = any($1)`, kept))
}

// prune_finished works in bounded batches, in the statuses asked for, and validates its input.
func TestPruneFinishedBatches(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	term := lead(t, pool, "boss")
	mustExec(t, pool, `insert into queues.task (task_type, status, attempt, lease_id, completed_at)
		select 'old', 'completed', 1, g, now() - interval '2 days' from generate_series(1, 2500) g`)
	mustExec(t, pool, `insert into queues.task (task_type, status, attempt, lease_id, dead_at)
		select 'old', 'dead', 1, g, now() - interval '2 days' from generate_series(1, 10) g`)
	mustExec(t, pool, `insert into queues.task_event (task_id, event) select task_id, 'completed' from queues.task`)

	var got []int
	for {
		n, ok, err := PruneFinished(ctx, pool, 24*time.Hour, 1000, term)
		require.NoError(t, err)
		require.True(t, ok)
		got = append(got, n)
		if n < 1000 {
			break
		}
	}
	require.Equal(t, []int{1000, 1000, 500}, got)
	require.Equal(t, 10, scalar[int](t, pool, `select count(*) from queues.task`), "dead tasks are not in the default statuses")
	require.Equal(t, 2510, scalar[int](t, pool, `select count(*) from queues.task_event`), "events go with their partitions, not their tasks")

	n, ok, err := PruneFinished(ctx, pool, 3*24*time.Hour, 1000, term, "dead")
	require.NoError(t, err)
	require.True(t, ok)
	require.Zero(t, n, "younger than older_than")
	n, _, err = PruneFinished(ctx, pool, 24*time.Hour, 1000, term, "dead")
	require.NoError(t, err)
	require.Equal(t, 10, n)
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task`))

	_, _, err = PruneFinished(ctx, pool, time.Hour, 1000, term, "running")
	require.ErrorContains(t, err, "statuses must be finished ones")
	_, _, err = PruneFinished(ctx, pool, time.Hour, 0, term)
	require.ErrorContains(t, err, "limit must be between 1 and 100000")
}

// Retention set to KeepForever prunes nothing.
func TestRetentionKeepForever(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	mustExec(t, pool, `insert into queues.task (task_type, status, attempt, lease_id, completed_at)
		values ('old', 'completed', 1, 1, now() - interval '1000 days')`)
	ev := newEvents()
	cfg := testConfig("leader", ev)
	cfg.Retention, cfg.FailedRetention = KeepForever, KeepForever
	start(t, pool, cfg)
	from := 0
	for range 3 {
		_, e := ev.waitFrom(t, &from, "pruned", kind(EventPruned))
		require.Zero(t, e.Tasks)
	}
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.task`))
}
