package admin

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// The operator's functions (bulk and by-id task actions, schedule controls) are granted to
// nobody: the worker role and PUBLIC are refused each of them, and the schedule actions' table.
func TestOperatorFunctionsNotGrantedToWorker(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	_, err := pool.Exec(ctx, `select queues.add_schedule('s', '* * * * *', 't')`)
	require.NoError(t, err)
	for _, role := range []string{"worker_service_user", "public_probe"} {
		if role == "public_probe" {
			_, err := pool.Exec(ctx, `do $$ begin create role public_probe nologin; exception when duplicate_object then null; end $$`)
			require.NoError(t, err)
		}
		for _, sql := range []string{
			`select * from queues.retry_tasks(array[1::bigint])`,
			`select * from queues.cancel_tasks(array[1::bigint])`,
			`select * from queues.cancel_workflow(1)`,
			`select * from queues.cancel_spawned_tasks(1)`,
			`select * from queues.delete_tasks(array[1::bigint])`,
			`select * from queues.retry_tasks_matching(_statuses => '{dead}')`,
			`select * from queues.cancel_tasks_matching(_statuses => '{pending}')`,
			`select * from queues.delete_tasks_matching(_statuses => '{completed}')`,
			`select queues.count_tasks_matching('retry', '{dead}')`,
			`select queues.pause_schedule('s')`,
			`select queues.resume_schedule('s', now())`,
			`select queues.run_schedule_now('s')`,
			`select * from queues.backfill_schedule('s', array[now() - interval '1 minute'])`,
			`select * from queues.schedule_event`,
			`select * from internal.matching_tasks('{dead}', null, null, null, null, null, null, 0, 1)`,
			`select * from internal.apply_task_action('retry', '{1}', '{dead}', 'x', null)`,
		} {
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, `set local role `+role)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, sql)
			require.ErrorContains(t, err, "permission denied", "%s: %s", role, sql)
			require.NoError(t, tx.Rollback(ctx))
		}
	}
}
