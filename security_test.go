package taskorch_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
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
	require.NoError(t, tx.QueryRow(ctx, `select count(*) from queues.lost_leases('{0}', '{0}')`).Scan(&n))
	require.Equal(t, 1, n, "the worker role asks which leases are gone (lease_check.go)")
	require.NoError(t, tx.QueryRow(ctx, `select count(*) from queues.complete_tasks_with_results('{}', '{}', null)`).Scan(&n),
		"the worker role completes with results through the function")
	var clear bool
	require.NoError(t, tx.QueryRow(ctx, `select queues.worker_waiting()`).Scan(&clear),
		"the worker role says it waits for a wake-up (internal/worker/listen.go)")
	require.True(t, clear)

	for _, sql := range []string{
		`select * from queues.task`,
		`insert into queues.task (task_type) values ('x')`,
		`update queues.task set status = 'completed'`,
		`delete from queues.task`,
		`select * from queues.task_lease`,
		`select * from queues.task_lease_default`,
		`select * from queues.task_event_default`,
		`insert into queues.task_event (task_id, event) values (1, 'x')`,
		`delete from queues.task_event`,
		`select internal.history_partition('task_lease', current_date + 30)`,
		`insert into queues.error (error_message) values ('x')`,
		`select queues.enqueue('x', '{}')`,
		`select queues.cancel_task(1)`,
		`select queues.retry_task(1)`,
		`select internal.check_task_input('x', '{}', 1, null)`,
		`select queues.watch_task(1)`,
		`select * from queues.task_waiter`,
		`insert into queues.task_waiter (task_id) values (1)`,
		`update queues.task set result = '{}'`,
		`select queues.signal('n', 'k')`,
		`select queues.wait_for_signal('n', 'k', 1)`,
		`select queues.signal_payload('n', 'k')`,
		`select internal.wake_signal_waiters('{1}', 'n', 'k')`,
		`select internal.lock_signal('n', 'k')`,
		`select internal.check_signal_key('x', 'n', 'k')`,
		`select * from queues.signal`,
		`insert into queues.signal (name, key) values ('n', 'k')`,
		`select * from queues.signal_wait`,
		`insert into queues.signal_wait (name, key, task_id) values ('n', 'k', 1)`,
		`select * from queues.process`,
		`select * from queues.process_instances()`,
		`select * from queues.process_instance_counts()`,
		`select queues.register_process('a', 'b', 'c')`,
		`select queues.process_next_run('a.b_supervisor', 1)`,
		`select * from queues.retry_process('comms.send_email', 1, 'why')`,
		`select queues.register_process_retry('a', 'b', 'retry_b')`,
		`select nextval('internal.task_waiter_seq')`,
		`select setval('internal.task_woken_seq', 1)`,
		`select last_value from internal.task_woken_seq`,
		`select pg_sequence_last_value('internal.task_waiter_seq')`,
	} {
		_, err := tx.Exec(ctx, "savepoint s")
		require.NoError(t, err)
		_, err = tx.Exec(ctx, sql)
		require.ErrorContains(t, err, "permission denied", sql)
		_, err = tx.Exec(ctx, "rollback to savepoint s")
		require.NoError(t, err)
	}
}

// A 100 MB payload is refused with a clear error, from SQL and from the Go client, and nothing
// is written.
func TestOversizedPayloadRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDB(t)
	_, err := pool.Exec(ctx, `select queues.enqueue('big', jsonb_build_object('blob', repeat('x', 100 * 1024 * 1024)))`)
	require.Error(t, err)
	require.ErrorContains(t, err, "enqueue: payload is 104857620 bytes, over the limit of 8388608 bytes (8 MiB) per task")
	require.ErrorIs(t, taskorch.MapPgError(err), taskorch.ErrInvalidInput)

	c, err := taskorch.NewClient(pool, &taskorch.ClientConfig{MaxPayloadBytes: -1}) // no client-side bound: the database's holds
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, taskorch.RawArgs{Type: "big", Payload: []byte(`{"blob":"` + strings.Repeat("y", 100<<20) + `"}`)}, nil)
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	require.ErrorContains(t, err, "8 MiB")

	def, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	_, err = def.Enqueue(ctx, taskorch.RawArgs{Type: "big", Payload: []byte(`{"blob":"` + strings.Repeat("z", 2<<20) + `"}`)}, nil)
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	require.ErrorContains(t, err, "over the client's limit of 1048576")
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from queues.task`))
}

// SQL injection through every input an application or an attacker controls: task types,
// idempotency keys and payload fields are data, never SQL.
func TestInjectionThroughInputs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	const evil = `x'); drop table queues.task; select ('`

	_, err := c.Enqueue(ctx, raw(evil, `{}`), nil)
	require.ErrorIs(t, err, taskorch.ErrInvalidInput, "a task type is checked against its grammar")
	_, err = pool.Exec(ctx, `select queues.enqueue($1, '{}')`, evil)
	require.ErrorContains(t, err, "is malformed")

	res, err := c.Enqueue(ctx, raw("report", `{"name": "`+strings.ReplaceAll(evil, `"`, `\"`)+`", "$$": "$$; drop table queues.task; $$"}`),
		&taskorch.EnqueueOpts{IdempotencyKey: evil})
	require.NoError(t, err)
	again, err := c.Enqueue(ctx, raw("report", `{}`), &taskorch.EnqueueOpts{IdempotencyKey: evil})
	require.NoError(t, err)
	require.True(t, again.Duplicate, "the key is compared as a value")
	require.Equal(t, res.TaskID, again.TaskID)
	require.Equal(t, evil, scalar[string](t, pool, `select idempotency_key from queues.task where task_id = $1`, res.TaskID))
	require.Equal(t, evil, scalar[string](t, pool, `select payload->>'name' from queues.task where task_id = $1`, res.TaskID))

	_, err = pool.Exec(ctx, `select queues.enqueue_many(array['ok', $1], array['{}'::jsonb, '{}'::jsonb])`, evil)
	require.ErrorContains(t, err, "task 2 of 2")
	_, err = pool.Exec(ctx, `select queues.pause_queue($1)`, evil)
	require.NoError(t, err, "a paused type is a value too")
	_, err = pool.Exec(ctx, `select queues.add_schedule($1, '* * * * *', 'report', '{}')`, evil)
	require.ErrorContains(t, err, "is malformed", "a schedule name is checked against its grammar")
	require.True(t, scalar[bool](t, pool, `select to_regclass('queues.task') is not null`), "the table survived")
	require.Equal(t, 1, scalar[int](t, pool, `select count(*)::int from queues.task`))
}

// An application role granted queues.signal (docs/security.md) emits signals through it and can
// touch neither the signal tables nor the waiting functions; the worker role gets none of them.
func TestSignalGrantedToApplicationOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDB(t)
	app := "app_" + randomHex(t, 6)
	mustExec(t, pool, "create role "+pgx.Identifier{app}.Sanitize()+" nologin")
	t.Cleanup(func() {
		mustExec(t, pool, "drop owned by "+pgx.Identifier{app}.Sanitize()+"; drop role "+pgx.Identifier{app}.Sanitize())
	})
	mustExec(t, pool, "grant usage on schema queues to "+pgx.Identifier{app}.Sanitize())
	mustExec(t, pool, "grant execute on function queues.signal(text, text, jsonb) to "+pgx.Identifier{app}.Sanitize())

	for _, fn := range []string{"queues.signal(text, text, jsonb)", "queues.wait_for_signal(text, text, bigint)", "queues.signal_payload(text, text)"} {
		require.False(t, scalar[bool](t, pool, `select has_function_privilege('worker_service_user', $1, 'execute')`, fn), fn)
	}

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "set local role "+pgx.Identifier{app}.Sanitize())
	require.NoError(t, err)
	require.True(t, scalar[bool](t, tx, `select queues.signal('email.confirmed', 'a@example.com', '{"via": "link"}')`))
	for _, sql := range []string{
		`select * from queues.signal`,
		`delete from queues.signal`,
		`select queues.signal_payload('email.confirmed', 'a@example.com')`,
		`select queues.wait_for_signal('email.confirmed', 'a@example.com', 1)`,
	} {
		_, err := tx.Exec(ctx, "savepoint s")
		require.NoError(t, err)
		_, err = tx.Exec(ctx, sql)
		require.ErrorContains(t, err, "permission denied", sql)
		_, err = tx.Exec(ctx, "rollback to savepoint s")
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit(ctx))
	require.JSONEq(t, `{"via": "link"}`, scalar[string](t, pool, `select queues.signal_payload('email.confirmed', 'a@example.com')::text`))
}
