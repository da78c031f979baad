package processtest_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// The hostile-input suite (docs/security.md, "The audit"; make test-hostile): every probe runs as
// one of the roles docs/security.md describes — an application granted enqueueing, signals and
// the kickoffs; an operator granted what the CLI's task and schedule commands need; the worker —
// and each is refused with a clear error or is harmless. Nothing is written by a refused probe,
// no process fact is forged, and the listings still read.

// hostileRoles creates an application role and an operator role granted as docs/security.md
// says, dropped when the test ends.
func hostileRoles(t *testing.T, pool *pgxpool.Pool) (app, operator string) {
	t.Helper()
	b := make([]byte, 5)
	_, err := rand.Read(b)
	require.NoError(t, err)
	suffix := hex.EncodeToString(b)
	app, operator = "app_"+suffix, "ops_"+suffix
	a, o := pgx.Identifier{app}.Sanitize(), pgx.Identifier{operator}.Sanitize()
	mustExec(t, pool, fmt.Sprintf(`create role %s nologin; create role %s nologin`, a, o))
	t.Cleanup(func() {
		mustExec(t, pool, fmt.Sprintf(`drop owned by %s, %s; drop role %s; drop role %s`, a, o, a, o))
	})
	// The application: enqueue (docs/security.md, "Letting an application enqueue"), signals and
	// the shipped kickoffs.
	mustExec(t, pool, `select queues.grant_enqueue($1::regrole)`, app)
	mustExec(t, pool, fmt.Sprintf(`
		grant execute on function queues.signal(text, text, jsonb) to %[1]s;
		grant usage on schema comms, files, api to %[1]s;
		grant execute on function comms.send_email(text, text, text, text, timestamptz),
		                          comms.send_sms(text, text, timestamptz),
		                          files.kickoff_file_deletion(bigint, timestamptz),
		                          api.request_account_deletion(bigint) to %[1]s`, a))
	// The operator: reading tasks and their history, cancel, retry, schedules, queue controls.
	mustExec(t, pool, fmt.Sprintf(`
		grant usage on schema queues to %[1]s;
		grant select on queues.task, queues.task_lease, queues.task_event, queues.error, queues.task_history, queues.schedule to %[1]s;
		grant execute on function queues.cancel_task(bigint, text), queues.retry_task(bigint),
		                          queues.add_schedule(text, text, text, jsonb, integer, integer, boolean, timestamptz),
		                          queues.put_schedule(text, text, text, jsonb, integer, integer, boolean, timestamptz),
		                          queues.permit_task_functions(text[], jsonb[]),
		                          queues.remove_schedule(text), queues.pause_queue(text, text), queues.resume_queue(text) to %[1]s;
		grant insert on queues.enqueue_permit to %[1]s`, o))
	return app, operator
}

// probe runs sql as role in a savepoint of tx and returns its error; the savepoint is rolled back.
func probe(t *testing.T, tx pgx.Tx, sql string, args ...any) error {
	t.Helper()
	ctx := context.Background()
	mustExec(t, tx, "savepoint probe")
	_, err := tx.Exec(ctx, sql, args...)
	mustExec(t, tx, "rollback to savepoint probe")
	return err
}

func requireSQLState(t *testing.T, err error, code, sql string) {
	t.Helper()
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe, sql)
	require.Equal(t, code, pe.Code, "%s: %s", sql, pe.Message)
}

// asRole begins a transaction as role.
func asRole(t *testing.T, pool *pgxpool.Pool, role string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	mustExec(t, tx, "set local role "+pgx.Identifier{role}.Sanitize())
	return tx
}

// workerFunctions lists every function of the shipped processes the worker may run by name: the
// supervisors and handlers a forged task would name.
func workerFunctions(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	fns := scalar[[]string](t, pool, `
		select array_agg(format('%s.%s', n.nspname, p.proname) order by 1)
		from pg_proc p join pg_namespace n on n.oid = p.pronamespace
		where n.nspname in ('comms', 'files', 'accounts', 'api')
		  and p.proargtypes = '3802'::oidvector
		  and has_function_privilege('worker_service_user', p.oid, 'execute')`)
	require.GreaterOrEqual(t, len(fns), 13, "the shipped supervisors and handlers")
	return fns
}

// factCounts counts the rows of every fact table of the shipped processes.
func factCounts(t *testing.T, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	tables := scalar[[]string](t, pool, `
		select array_agg(format('%I.%I', n.nspname, c.relname) order by 1)
		from pg_class c join pg_namespace n on n.oid = c.relnamespace
		where n.nspname in ('comms', 'files', 'accounts') and c.relkind = 'r'`)
	out := make(map[string]int64, len(tables))
	for _, tbl := range tables {
		out[tbl] = scalar[int64](t, pool, "select count(*) from "+tbl)
	}
	return out
}

// An application role may enqueue and start processes, and can neither poison the queue with an
// infinite time nor have the worker run a supervisor or handler for it: every forged task is
// refused at once (42501), through every enqueue function and every field that names a function,
// and no fact table gains a row. Its legitimate kickoff still works end to end.
func TestHostileApplicationRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 2)
	app, _ := hostileRoles(t, pool)
	fns := workerFunctions(t, pool)
	before := factCounts(t, pool)
	tasksBefore := scalar[int64](t, pool, `select count(*) from queues.task`)

	tx := asRole(t, pool, app)
	// 1. Infinite times, in every enqueue function.
	for _, sql := range []string{
		`select queues.enqueue('t.a', '{}', '-infinity')`,
		`select queues.enqueue('t.a', '{}', 'infinity')`,
		`select queues.enqueue('t.a', '{}', '4713-01-01 BC')`,
		`select queues.enqueue('t.a', '{}', '294276-01-01')`,
		`select * from queues.enqueue_with_result('t.a', '{}', '-infinity')`,
		`select queues.enqueue_many(array['t.a', 't.b'], array['{}', '{}']::jsonb[], array[now(), '-infinity'])`,
		`select * from queues.enqueue_many_with_result(array['t.a'], array['{}']::jsonb[], array['infinity'::timestamptz])`,
		`select * from queues.insert_task('t.a', '{}', '-infinity')`,
		`select * from queues.enqueue_debounced('t.a', '{}', 'k', interval '1000 years')`,
		`select comms.send_email('a@example.com', 'hi', 'x', _scheduled_at => '-infinity')`,
	} {
		requireSQLState(t, probe(t, tx, sql), "22023", sql)
	}

	// 2. Every supervisor and handler of the shipped processes, named by a task the application
	// enqueues: as a db_function, and as each handler of each channel type, through each
	// enqueue function.
	forged := `{"send_email_attempt_id": 1, "send_sms_attempt_id": 1, "file_deletion_task_id": 1, "send_email_task_id": 1,
		"original_payload": {"send_email_attempt_id": 1}, "worker_payload": {"provider": "resend", "id": "forged"}}`
	for _, fn := range fns {
		for _, sql := range []string{
			`select queues.enqueue('db_function', $1::jsonb || jsonb_build_object('db_function', $2::text))`,
			`select * from queues.enqueue_with_result('db_function', $1::jsonb || jsonb_build_object('db_function', $2::text))`,
			`select queues.enqueue_many(array['t.ok', 'db_function'], array['{}', $1::jsonb || jsonb_build_object('db_function', $2::text)])`,
			`select * from queues.enqueue_debounced('db_function', $1::jsonb || jsonb_build_object('db_function', $2::text), 'k', '0')`,
			`select queues.enqueue('email', $1::jsonb || jsonb_build_object('success_handler', $2::text))`,
			`select queues.enqueue('sms', $1::jsonb || jsonb_build_object('error_handler', $2::text))`,
			`select queues.enqueue('file_delete', $1::jsonb || jsonb_build_object('before_handler', $2::text))`,
			// Past the enqueue functions: the permit itself, and the insert functions without one.
			`insert into queues.enqueue_permit (permit_xid, names, granted_to) values (pg_current_xact_id(), array[$2::text], current_user || $1::text)`,
			`select * from queues.insert_task('db_function', $1::jsonb || jsonb_build_object('db_function', $2::text))`,
			`select * from queues.insert_tasks(array['email'], array[$1::jsonb || jsonb_build_object('success_handler', $2::text)])`,
		} {
			requireSQLState(t, probe(t, tx, sql, forged, fn), "42501", fn+": "+sql)
		}
	}
	// 3. The tables themselves.
	for _, sql := range []string{
		`insert into queues.task (task_type, payload) values ('db_function', '{"db_function": "comms.record_email_success"}')`,
		`update queues.task set payload = '{}'`,
		`insert into comms.send_email_attempt_succeeded (send_email_attempt_id) values (1)`,
		`select queues.complete_task(1, 1)`,
		`select queues.add_schedule('s', '* * * * *', 't.a')`,
		// The wake-up state is the workers' and the enqueue trigger's.
		`select queues.worker_waiting()`,
		`select setval('internal.task_woken_seq', 1)`,
	} {
		requireSQLState(t, probe(t, tx, sql), "42501", sql)
	}

	// 4. What the application may do, it still can: a plain task, a task naming a function of
	// its own, and a kickoff, which enqueues the process's supervisor as its owner.
	mustExec(t, pool, `create schema appfn;
		create function appfn.ping(jsonb) returns jsonb language sql as $$ select '{"status": "succeeded"}'::jsonb $$;
		revoke all on function appfn.ping(jsonb) from public;
		grant usage on schema appfn to worker_service_user;
		grant execute on function appfn.ping(jsonb) to worker_service_user`)
	mustExec(t, pool, fmt.Sprintf(`grant usage on schema appfn to %[1]s; grant execute on function appfn.ping(jsonb) to %[1]s`,
		pgx.Identifier{app}.Sanitize()))
	plain := scalar[int64](t, tx, `select queues.enqueue('t.plain', '{}')`)
	own := scalar[int64](t, tx, `select queues.enqueue('db_function', '{"db_function": "appfn.ping"}')`)
	email := scalar[int64](t, tx, `select comms.send_email('ann@example.com', 'Welcome', 'Hello Ann')`)
	// A forged delivery report: a signal the application may emit wakes the process, and
	// records nothing it could take for a fact.
	require.True(t, scalar[bool](t, tx, `select queues.signal('email.bounced', $1::bigint::text, '{"reason": "forged"}')`, email))
	require.NoError(t, tx.Commit(ctx))

	require.Equal(t, tasksBefore+3, scalar[int64](t, pool, `select count(*) from queues.task`),
		"the application's three tasks and nothing else")

	email2 := &scripted{}
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: email2})
	waitTrue(t, pool, "the application's email process succeeds",
		`select exists (select from comms.send_email_task_succeeded where send_email_task_id = $1)`, email)
	require.Zero(t, scalar[int64](t, pool, `select count(*) from comms.send_email_task_failed where send_email_task_id = $1`, email))
	require.Len(t, email2.Calls(), 1, "one email sent, for the kickoff; none for a forged task")
	// The application's own function runs whenever the worker claims it (before or after the
	// e-mail); a task type no worker handles is never claimed.
	waitTrue(t, pool, "the application's own function ran", `select status = 'completed' from queues.task where task_id = $1`, own)
	require.NotEqual(t, "running", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, plain))
	quiet(t, pool, "send_email_task_id", email)

	// Every fact is the legitimate process's: one message, one attempt, its success; nothing
	// else, no bounce for the forged report.
	want := maps.Clone(before)
	for _, tbl := range []string{"comms.message", "comms.email_message", "comms.send_email_task", "comms.send_email_attempt",
		"comms.send_email_attempt_succeeded", "comms.send_email_task_succeeded"} {
		want[tbl]++
	}
	after := factCounts(t, pool)
	delete(after, "comms.send_email_due") // the supervisor's agenda, not a fact
	delete(want, "comms.send_email_due")
	require.Equal(t, want, after, "the facts are the legitimate process's and nothing else")

	// The listings read everything there is.
	client, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	_, err = client.List(ctx, &taskorch.ListParams{Limit: 1000})
	require.NoError(t, err)
	require.NotZero(t, scalar[int64](t, pool, `select count(*) from queues.queue_stats()`))
}

// An operator granted schedules and task controls cannot schedule a forged task or an infinite
// time, and cancelling or retrying forges no fact.
func TestHostileOperatorRole(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	_, operator := hostileRoles(t, pool)
	fns := workerFunctions(t, pool)
	tx := asRole(t, pool, operator)
	for _, fn := range fns {
		for _, sql := range []string{
			`select queues.add_schedule('forged', '* * * * *', 'db_function', jsonb_build_object('db_function', $1::text))`,
			`select queues.add_schedule('forged', '* * * * *', 'email', jsonb_build_object('success_handler', $1::text))`,
			`select queues.put_schedule('forged', '* * * * *', 'db_function', jsonb_build_object('db_function', $1::text))`,
		} {
			requireSQLState(t, probe(t, tx, sql, fn), "42501", fn+": "+sql)
		}
	}
	for _, sql := range []string{
		`select queues.add_schedule('s', '* * * * *', 't.a', _next_run_at => '-infinity')`,
		`select queues.add_schedule('s', '* * * * *', 't.a', _next_run_at => 'infinity')`,
	} {
		requireSQLState(t, probe(t, tx, sql), "22023", sql)
	}
	for _, sql := range []string{
		`update queues.schedule set next_run_at = '-infinity'`,
		`select queues.enqueue('t.a', '{}')`,
		`insert into queues.task (task_type) values ('t.a')`,
	} {
		requireSQLState(t, probe(t, tx, sql), "42501", sql)
	}
	require.True(t, scalar[bool](t, tx, `select queues.add_schedule('fine', '@hourly', 't.a')`))
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.schedule`), "nothing committed yet")
}

// Quieting a worker is an operator's action granted to nobody: neither an application role,
// an operator's role without the grant, nor the worker role can quiet a worker (and stop the
// fleet's claims). Granted, the operator's call refuses an unknown worker and a forged actor
// and writes nothing then; the actor it records by default is the login role, which SET ROLE
// does not change.
func TestHostileQuietWorker(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	app, operator := hostileRoles(t, pool)
	mustExec(t, pool, `select * from queues.register_worker_instance('w1', 'p1', 'h', 1, 4, 'v', 'postgres', null, false, interval '30 seconds')`)
	for _, role := range []string{app, operator, "worker_service_user"} {
		tx := asRole(t, pool, role)
		for _, sql := range []string{`select queues.quiet_worker('w1')`, `select queues.resume_worker('w1')`} {
			requireSQLState(t, probe(t, tx, sql), "42501", role+": "+sql)
		}
		require.NoError(t, tx.Rollback(t.Context()))
	}
	mustExec(t, pool, fmt.Sprintf(`grant execute on function queues.quiet_worker(text, text), queues.resume_worker(text, text) to %s`,
		pgx.Identifier{operator}.Sanitize()))
	tx := asRole(t, pool, operator)
	requireSQLState(t, probe(t, tx, `select queues.quiet_worker('nobody')`), "P0002", "unknown worker")
	requireSQLState(t, probe(t, tx, `select queues.quiet_worker('w1', e'mallory\nroot')`), "22023", "actor with a control character")
	requireSQLState(t, probe(t, tx, `select queues.quiet_worker('w1', repeat('a', 201))`), "22023", "actor too long")
	require.True(t, scalar[bool](t, tx, `select queues.quiet_worker('w1')`))
	require.NoError(t, tx.Commit(t.Context()))
	require.Equal(t, []string{"quieted by " + scalar[string](t, pool, `select session_user::text`)},
		scalar[[]string](t, pool, `select array_agg(format('%s by %s', event, actor) order by worker_event_id) from queues.worker_event where worker_id = 'w1'`),
		"one event, the refused calls wrote nothing, the actor is the login role")
}

// The worker role claims and records outcomes, and cannot snooze a task to an infinite time,
// enqueue, or ask for a permit.
func TestHostileWorkerRole(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	id := scalar[int64](t, pool, `select queues.enqueue('t.a', '{}')`)
	scalar[int64](t, pool, `select queues.enqueue('t.b', '{}')`) // left for the claims without a worker id
	tx := asRole(t, pool, "worker_service_user")
	lease := scalar[int64](t, tx, `select lease_id from queues.claim_tasks('w1', 1, _task_types => array['t.a'])`)
	// Leadership only for a registered, live worker and a bounded time; claims only for a worker.
	for _, sql := range []string{
		`select queues.acquire_leadership('evil', interval '100 years')`,
		`select * from queues.claim_tasks(null, 1)`,
		`select * from queues.claim_tasks('', 1)`,
	} {
		requireSQLState(t, probe(t, tx, sql), "22023", sql)
	}
	require.Nil(t, scalar[*int64](t, tx, `select queues.acquire_leadership('evil', interval '1 minute')`),
		"no leadership for a worker id nobody registered")
	for _, sql := range []string{
		`select queues.snooze_task($1, $2, '-infinity')`,
		`select queues.snooze_task($1, $2, 'infinity')`,
		`select queues.fail_task_with_policy($1, 'x', $2, interval '1000 years')`,
	} {
		requireSQLState(t, probe(t, tx, sql, id, lease), "22023", sql)
	}
	for _, sql := range []string{
		`select queues.enqueue('t.a', '{}')`,
		`select queues.permit_task_functions(array['db_function'], array['{"db_function": "comms.send_email_supervisor"}'::jsonb])`,
		`insert into queues.enqueue_permit (permit_xid, names, granted_to) values (pg_current_xact_id(), array['comms.send_email_supervisor'], 'x')`,
		`select * from queues.insert_task('db_function', '{"db_function": "comms.send_email_supervisor"}')`,
	} {
		requireSQLState(t, probe(t, tx, sql), "42501", sql)
	}
	require.True(t, scalar[bool](t, tx, `select queues.snooze_task($1, $2, now() + interval '1 minute')`, id, lease))
}
