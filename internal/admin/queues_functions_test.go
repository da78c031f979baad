package admin

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// ListQueues lists each SQL function as a queue of its own, db_function:<schema.function>, with
// its own backlog, pause and the workers that claim db_function; db_function itself has a line
// only while it is paused (then every function shows that pause) or when a task of it names no
// function.
func TestListQueuesPerFunction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	_, err := pool.Exec(ctx, `
		create schema billing; create schema reports;
		create function billing.recalc(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;
		create function reports.daily(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;
		-- billing.recalc: two due (one backdated a minute), one scheduled, one dead.
		select queues.enqueue('db_function', '{"db_function": "billing.recalc", "n": 1}', now() - interval '1 minute');
		select queues.enqueue('db_function', '{"db_function": "billing.recalc", "n": 2}');
		select queues.enqueue('db_function', '{"db_function": "billing.recalc", "n": 3}', now() + interval '1 hour');
		select queues.enqueue('db_function', '{"db_function": "billing.recalc", "n": 4}', now() - interval '1 day', 10, null, 1);
		-- reports.daily: one running.
		select queues.enqueue('db_function', '{"db_function": "reports.daily"}', now() - interval '1 day', 5);
		select * from queues.claim_tasks('w-1', 2, '5 minutes', array['db_function']);
		select queues.fail_task(task_id, 'boom', lease_id, true) from queues.task where payload ->> 'n' = '4';
		select queues.pause_queue('db_function:billing.recalc', 'ops-bob');
		-- A worker that claims db_function (and mail), one that claims resize only.
		select queues.register_worker('w-1', 'host', 1, 4, 'v1', null, array['db_function', 'mail']);
		select queues.register_worker('w-2', 'host', 1, 4, 'v1', null, array['resize']);
		-- A schedule of a function with no task yet.
		create function reports.weekly(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;
		select queues.add_schedule('weekly', '0 3 * * 1', 'db_function', '{"db_function": "reports.weekly"}');
		-- A task from before core/0090 has no key_scope: its payload names its function.
		update queues.task set key_scope = '' where payload ->> 'n' = '2';`)
	require.NoError(t, err)

	type row struct {
		queue                                 string
		due, scheduled, running, failed, dead int64
		pausedBy, pausedQueue                 string
		workers                               int64
	}
	list := func() []row {
		qs, err := ListQueues(ctx, pool)
		require.NoError(t, err)
		var got []row
		for _, q := range qs {
			r := row{queue: q.TaskType, due: q.Due, scheduled: q.Scheduled, running: q.Running, failed: q.Failed, dead: q.Dead, workers: q.Workers}
			require.Equal(t, q.State == QueuePaused, q.PausedAt != nil, q.TaskType)
			if q.PausedBy != nil {
				r.pausedBy = *q.PausedBy
			}
			if q.PausedQueue != nil {
				r.pausedQueue = *q.PausedQueue
			}
			if q.TaskType == "db_function:billing.recalc" {
				require.InDelta(t, 60, q.OldestDueSeconds, 30, "its oldest due task was due a minute ago")
			}
			require.Equal(t, q.Due > 0 && q.Workers == 0, q.Unserved, q.TaskType)
			got = append(got, r)
		}
		return got
	}
	require.Equal(t, []row{
		{queue: "db_function:billing.recalc", due: 2, scheduled: 1, dead: 1, pausedBy: "ops-bob", workers: 1},
		{queue: "db_function:reports.daily", running: 1, workers: 1},
		{queue: "db_function:reports.weekly", workers: 1},
		{queue: "mail", workers: 1},
		{queue: "resize", workers: 1},
	}, list(), "no db_function line: every task names its function, and the type is not paused")

	// Pausing db_function holds every function: its line appears, and the functions without a
	// pause of their own show it.
	_, err = pool.Exec(ctx, `select queues.pause_queue('db_function', 'ops-carol')`)
	require.NoError(t, err)
	require.Equal(t, []row{
		{queue: "db_function", pausedBy: "ops-carol", workers: 1},
		{queue: "db_function:billing.recalc", due: 2, scheduled: 1, dead: 1, pausedBy: "ops-bob", workers: 1},
		{queue: "db_function:reports.daily", running: 1, pausedBy: "ops-carol", pausedQueue: "db_function", workers: 1},
		{queue: "db_function:reports.weekly", pausedBy: "ops-carol", pausedQueue: "db_function", workers: 1},
		{queue: "mail", workers: 1},
		{queue: "resize", workers: 1},
	}, list())

	// A db_function task that names no function (only a row written around the insert check
	// could be one) is listed under db_function; with no worker claiming db_function the
	// functions' due tasks are unserved.
	_, err = pool.Exec(ctx, `
		select queues.resume_queue('db_function');
		set session_replication_role = replica;
		insert into queues.task (task_type, payload, status) values ('db_function', '{}', 'pending');
		set session_replication_role = default;
		select queues.deregister_worker('w-1');`)
	require.NoError(t, err)
	require.Equal(t, []row{
		{queue: "db_function", due: 1},
		{queue: "db_function:billing.recalc", due: 2, scheduled: 1, dead: 1, pausedBy: "ops-bob"},
		{queue: "db_function:reports.daily", running: 1},
		{queue: "db_function:reports.weekly"},
		{queue: "resize", workers: 1},
	}, list())

	// A worker that claims every type (task_types NULL) counts on every line.
	_, err = pool.Exec(ctx, `select queues.register_worker('w-3', 'host', 1, 4, 'v1', null, null)`)
	require.NoError(t, err)
	require.Equal(t, []row{
		{queue: "db_function", due: 1, workers: 1},
		{queue: "db_function:billing.recalc", due: 2, scheduled: 1, dead: 1, pausedBy: "ops-bob", workers: 1},
		{queue: "db_function:reports.daily", running: 1, workers: 1},
		{queue: "db_function:reports.weekly", workers: 1},
		{queue: "resize", workers: 2},
	}, list())
}
