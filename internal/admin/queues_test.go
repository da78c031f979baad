package admin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// ListQueues: every type with work, paused, among the newest tasks, claimed by a worker or
// scheduled, with its backlog per state and its pause; finished tasks are not counted.
func TestListQueues(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	_, err := pool.Exec(ctx, `
		-- mail: two due (one backdated a minute), one scheduled, one running, one completed.
		select queues.enqueue('mail', '{"n": 1}', now() - interval '1 minute');
		select queues.enqueue('mail', '{"n": 2}');
		select queues.enqueue('mail', '{"n": 3}', now() + interval '1 hour');
		select queues.enqueue('mail', '{"n": 4}', now() - interval '2 minutes', 10);
		select queues.enqueue('mail', '{"n": 5}', now() - interval '2 minutes', 5);
		select * from queues.claim_tasks('w-1', 2, '5 minutes', array['mail']);
		select queues.complete_task(task_id, lease_id) from queues.task where payload = '{"n": 5}';
		-- report: one failed for good, one dead, one cancelled; paused.
		select queues.enqueue('report', '{"n": 1}', now(), 0, null, 1);
		select queues.enqueue('report', '{"n": 2}', now(), 0, null, 1);
		select queues.enqueue('report', '{"n": 3}', now() + interval '1 day');
		select * from queues.claim_tasks('w-1', 2, '5 minutes', array['report']);
		select queues.fail_task(task_id, 'bad input', lease_id, false) from queues.task where payload = '{"n": 1}' and task_type = 'report';
		select queues.fail_task(task_id, 'timeout', lease_id, true) from queues.task where payload = '{"n": 2}' and task_type = 'report';
		select queues.cancel_task(task_id) from queues.task where payload = '{"n": 3}' and task_type = 'report';
		select queues.pause_queue('report', 'ops-alice');
		-- idle: only a completed task, listed as one of the newest tasks.
		select queues.enqueue('idle', '{}');
		select * from queues.claim_tasks('w-1', 1, '5 minutes', array['idle']);
		select queues.complete_task(task_id, lease_id) from queues.task where task_type = 'idle';
		-- paused with no task at all; claimed by a worker; enqueued by a schedule.
		select queues.pause_queue('frozen');
		select queues.register_worker('w-2', 'host', 1, 4, 'v1', null, array['resize']);
		insert into queues.schedule (name, cron, task_type) values ('nightly', '0 3 * * *', 'digest');`)
	require.NoError(t, err)

	qs, err := ListQueues(ctx, pool)
	require.NoError(t, err)
	type row struct {
		typ, state                            string
		due, scheduled, running, failed, dead int64
		pausedBy                              string
	}
	var got []row
	for _, q := range qs {
		r := row{q.TaskType, q.State, q.Due, q.Scheduled, q.Running, q.Failed, q.Dead, ""}
		require.Equal(t, q.State == QueuePaused, q.PausedAt != nil, q.TaskType)
		if q.PausedBy != nil {
			r.pausedBy = *q.PausedBy
		}
		got = append(got, r)
		switch q.TaskType {
		case "mail":
			require.InDelta(t, 60, q.OldestDueSeconds, 30, "the oldest due mail was due a minute ago")
		default:
			require.Zero(t, q.OldestDueSeconds, q.TaskType)
		}
	}
	var user string
	require.NoError(t, pool.QueryRow(ctx, `select session_user`).Scan(&user))
	require.Equal(t, []row{
		{"digest", QueueRunning, 0, 0, 0, 0, 0, ""},
		{"frozen", QueuePaused, 0, 0, 0, 0, 0, user},
		{"idle", QueueRunning, 0, 0, 0, 0, 0, ""},
		{"mail", QueueRunning, 2, 1, 1, 0, 0, ""},
		{"report", QueuePaused, 0, 0, 0, 1, 1, "ops-alice"},
		{"resize", QueueRunning, 0, 0, 0, 0, 0, ""},
	}, got)
	for _, q := range qs {
		if q.PausedAt != nil {
			require.WithinDuration(t, time.Now(), *q.PausedAt, time.Minute)
		}
	}
}
