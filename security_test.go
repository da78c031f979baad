package taskorch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// worker_service_user can run the queue functions a worker needs and nothing else: no table
// access, no enqueue, no operator functions. run_function_test.go attacks the function runner.
func TestWorkerRoleLeastPrivilege(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := newClient(t)
	mustExec(t, pool, `select queues.enqueue('w', '{}')`)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `set local role worker_service_user`)
	require.NoError(t, err)

	var n int
	require.NoError(t, tx.QueryRow(ctx, `select count(*) from queues.claim_tasks('w1', 10)`).Scan(&n))
	require.Equal(t, 1, n, "the worker role claims through the function")

	for _, sql := range []string{
		`select * from queues.task`,
		`insert into queues.task (task_type) values ('x')`,
		`update queues.task set status = 'completed'`,
		`delete from queues.task`,
		`select * from queues.task_lease`,
		`insert into queues.error (error_message) values ('x')`,
		`select queues.enqueue('x', '{}')`,
		`select queues.cancel_task(1)`,
		`select queues.retry_task(1)`,
		`select internal.check_task_input('x', '{}', 1, null)`,
	} {
		_, err := tx.Exec(ctx, "savepoint s")
		require.NoError(t, err)
		_, err = tx.Exec(ctx, sql)
		require.ErrorContains(t, err, "permission denied", sql)
		_, err = tx.Exec(ctx, "rollback to savepoint s")
		require.NoError(t, err)
	}
}
