package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/admin"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// A worker without an email provider claims no email task. Alone, it leaves the comms processes'
// email tasks pending, no attempt spent, while it runs the rest (the supervisors, a no-op
// enqueued after them), and `queues list` says no worker claims email. With a second worker that
// has the outbox, every process succeeds without a failed attempt, and every email task was
// claimed once, by that worker.
func TestE2EWorkerWithoutProviderClaimsNoEmail(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	db := []string{"--database-url", url}
	common := []string{"TASKORCH_PROCESSES=comms", "TASKORCH_SMS_PROVIDER=", "TASKORCH_FILES_SIGNER=", "TASKORCH_POLL_INTERVAL=20ms"}
	startWorkerProc(t, url, append(common, "TASKORCH_WORKER_ID=no-email", "TASKORCH_EMAIL_PROVIDER=")...)
	waitFor(t, pool, "the comms process installed", `select to_regprocedure('comms.send_email(text,text,text,text,timestamptz)') is not null`)
	_, err := pool.Exec(t.Context(), `update comms.process_config set backoff_base = '100 ms', check_interval = '500 ms'`)
	require.NoError(t, err)

	const half = 100
	sendEmails := func(from int) {
		_, err := pool.Exec(t.Context(), `select comms.send_email(format('user%s@example.com', i), 'Welcome', 'Hello')
			from generate_series($1::int, $1::int + $2::int - 1) i`, from, half)
		require.NoError(t, err)
	}
	sendEmails(1)
	waitFor(t, pool, "the supervisors enqueued an email task per process", `select count(*) = $1 from queues.task where task_type = 'email'`, half)
	// The worker works past them: a task it runs, enqueued after them, comes after them in claim order.
	marker := enqueue(t, pool, "taskorch.noop", `{}`, 0)
	waitStatus(t, pool, marker, "completed")
	require.Equal(t, "100 pending, attempt 0, 0 leases", q[string](t, pool, `select format('%s %s, attempt %s, %s leases', count(*),
		string_agg(distinct status::text, ','), max(attempt), (select count(*) from queues.task_lease l join queues.task e using (task_id) where e.task_type = 'email'))
		from queues.task where task_type = 'email'`))
	require.Equal(t, []string{"db_function", "taskorch.fail", "taskorch.noop", "taskorch.sleep"},
		q[[]string](t, pool, `select task_types from queues.worker where worker_id = 'no-email'`))

	email := func() admin.Queue {
		t.Helper()
		for _, qu := range runJSON[[]admin.Queue](t, append([]string{"queues", "list", "--json"}, db...)...) {
			if qu.TaskType == "email" {
				return qu
			}
		}
		t.Fatal("queues list has no email row")
		return admin.Queue{}
	}
	e := email()
	require.Equal(t, int64(half), e.Due)
	require.Zero(t, e.Workers)
	require.True(t, e.Unserved, "no worker serves email: %+v", e)
	require.Positive(t, e.OldestDueSeconds)
	r := run(t, append([]string{"queues", "list"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Regexp(t, `(?m)^email +running +100 +0 +0 +0 +0 +\d+s ago +0 · unserved$`, r.out)
	// Each SQL function is a queue of its own, served by the worker that claims db_function.
	require.Regexp(t, `(?m)^db_function:comms\.send_email_supervisor +running +\d+ +\d+ +\d+ +0 +0 +.+ +1$`, r.out)
	require.NotRegexp(t, `(?m)^db_function `, r.out, "every db_function task names its function")
	require.Regexp(t, `^warning: no live worker claims email tasks: 100 due, the oldest waiting \d+s; they wait for a worker with an email provider \(TASKORCH_EMAIL_PROVIDER\)\n$`, r.err)

	// A worker with the outbox: it claims the email tasks, old and new.
	startWorkerProc(t, url, append(common, "TASKORCH_WORKER_ID=outbox", "TASKORCH_EMAIL_PROVIDER=outbox")...)
	sendEmails(half + 1)
	waitFor(t, pool, "every process succeeded", `select count(*) = $1 from comms.send_email_task_succeeded`, 2*half)
	require.Zero(t, q[int](t, pool, `select count(*)::int from comms.send_email_attempt_failed`), "no failed attempt")
	require.Zero(t, q[int](t, pool, `select count(*)::int from comms.send_email_task_failed`))
	require.Equal(t, map[string]int{"outbox": 2 * half}, q[map[string]int](t, pool, `select jsonb_object_agg(worker_id, n) from (
		select l.worker_id, count(*) as n from queues.task_lease l join queues.task t using (task_id)
		where t.task_type = 'email' group by 1) x`), "every email task claimed once, by the worker with the outbox")
	e = email()
	require.False(t, e.Unserved)
	require.Equal(t, int64(1), e.Workers)
	require.Zero(t, e.Due)
}
