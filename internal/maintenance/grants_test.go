package maintenance

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// worker_service_user can do everything a worker and a leader do here, through the functions,
// and nothing else: no tables, no schedule administration, no internal helpers.
func TestWorkerRoleGrants(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	mustExec(t, pool, `select queues.add_schedule('s', '* * * * *', 't', _next_run_at => now() - interval '1 minute')`)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `set local role worker_service_user`)
	require.NoError(t, err)

	for _, sql := range []string{
		`select queues.register_worker('w', 'h', 1, 4, 'v', 'postgres', array['a'])`,
		`select queues.heartbeat_worker('w')`,
		`select queues.acquire_leadership('w', interval '1 minute')`,
		`select * from queues.reap_dead_workers(interval '30 seconds', 1)`,
		`select queues.prune_finished(interval '7 days', 1000, 1)`,
		`select queues.prune_finished(interval '7 days', 1000, 1, '{failed,dead}')`,
		`select queues.maintain_history(1, interval '7 days')`,
		`select queues.maintain_history(1, null, 3)`,
		`select * from queues.due_schedules(now())`,
		`select queues.enqueue_schedule_tick('s', '* * * * *', date_trunc('minute', now()), now() + interval '1 minute', 1)`,
		`select * from queues.declare_schedules(1, '[]')`,
		`select queues.resign_leadership('w')`,
		`select queues.deregister_worker('w')`,
		`select * from queues.register_worker_instance('w2', 'i', 'h', 1, 4, 'v', 'postgres', null, true, interval '30 seconds')`,
		`select queues.heartbeat_worker('w2', 'i')`,
		`select queues.heartbeat_worker_state('w2', 'i')`,
		`select queues.acquire_leadership('w2', interval '1 minute', 'i')`,
		`select * from queues.reap_lost_sessions(interval '1 second', 1)`,
		`select queues.deregister_worker('w2', 'i')`,
	} {
		_, err := tx.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	for _, sql := range []string{
		`select * from queues.worker`,
		`select * from queues.leader`,
		`select * from queues.schedule`,
		`update queues.leader set term = term + 1`,
		`insert into queues.worker (worker_id, hostname) values ('x', 'h')`,
		`select queues.add_schedule('x', '* * * * *', 't')`,
		`select queues.remove_schedule('s')`,
		`select internal.holds_leader_term(1)`,
		`select internal.worker_session_state(1, now())`,
		`select internal.worker_session_class()`,
		`select * from internal.recover_worker_tasks('{w}', '%s', '{}')`,
		`select nextval('queues.worker_session_key_seq')`,
		`select internal.schedule_tick_key('s', now())`,
		`select internal.history_partition('task_lease', current_date + 10)`,
		`select * from queues.task_lease`,
		`select * from queues.task_event_default`,
		`delete from queues.task_event`,
		`select nextval('queues.task_lease_task_lease_id_seq')`,
		`select queues.enqueue('t', '{}')`,
		`select queues.quiet_worker('w2')`,
		`select queues.resume_worker('w2')`,
		`select * from queues.worker_quiet`,
		`select * from queues.worker_event`,
	} {
		_, err := tx.Exec(ctx, "savepoint s")
		require.NoError(t, err)
		_, err = tx.Exec(ctx, sql)
		require.ErrorContains(t, err, "permission denied", sql)
		_, err = tx.Exec(ctx, "rollback to savepoint s")
		require.NoError(t, err)
	}
}
