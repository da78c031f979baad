package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/admin"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// processFixture installs the shipped processes and writes instances in each state through
// their kickoffs and fact tables (as the supervisors and handlers would): email 1 failed after
// 3 attempts, email 2 with its attempt outstanding, email 3 scheduled for 2030, an account
// deletion (1) that started a file deletion (1).
func processFixture(t *testing.T) (url string) {
	t.Helper()
	url = dbtest.NewDBURL(t)
	r := run(t, "migrate", "up", "--processes", "comms,files,accounts", "--database-url", url)
	require.Equal(t, 0, r.code, r.err)
	pool := openPool(t, url)
	for _, sql := range []string{
		`select comms.send_email('gone@example.com', 'Hi', 'text')`,
		`insert into comms.send_email_attempt (send_email_task_id, task_id)
		 select 1, queues.enqueue('email', jsonb_build_object('send_email_attempt_id', i)) from generate_series(1, 3) i`,
		`insert into comms.send_email_attempt_failed (send_email_attempt_id, error_message)
		 select send_email_attempt_id, 'email provider: smtp: 554 mailbox unavailable' from comms.send_email_attempt`,
		`insert into comms.send_email_task_failed (send_email_task_id, error_message)
		 values (1, 'email not sent after 3 failed attempts (max 3); last error: email provider: smtp: 554 mailbox unavailable')`,
		`select comms.send_email('slow@example.com', 'Hi', 'text')`,
		`insert into comms.send_email_attempt (send_email_task_id, task_id) values (2, queues.enqueue('email', '{"send_email_attempt_id": 4}'))`,
		`select comms.send_email('later@example.com', 'Later', 'text', null, '2030-01-01T00:00:00Z')`,
		`insert into accounts.account (email) values ('ann@example.com')`,
		`insert into files.file (bucket, object_key, owner_account_id) values ('recordings', 'a.wav', 1)`,
		`select api.request_account_deletion(1)`,
		`select files.kickoff_file_deletion(1)`,
	} {
		_, err := pool.Exec(t.Context(), sql)
		require.NoError(t, err, sql)
	}
	return url
}

// `processes list` and `processes show`: the tables (golden files), the JSON, the filters.
func TestProcessesCommands(t *testing.T) {
	t.Parallel()
	db := []string{"--database-url", processFixture(t)}
	cmd := func(args ...string) string {
		t.Helper()
		r := run(t, append(args, db...)...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.err)
		return r.out
	}
	golden(t, "processes_list", cmd("processes", "list"))
	golden(t, "processes_list_failed", cmd("processes", "list", "--state", "failed"))
	golden(t, "processes_show_failed", cmd("processes", "show", "comms.send_email", "1"))
	golden(t, "processes_show_account", cmd("processes", "show", "accounts.account_deletion", "1"))

	type list struct {
		Instances []admin.ProcessInstance `json:"instances"`
	}
	l := runJSON[list](t, append([]string{"processes", "list", "--process", "comms.send_email"}, db...)...)
	var states []string
	for _, x := range l.Instances {
		states = append(states, x.State)
	}
	require.Equal(t, []string{"waiting", "running", "failed"}, states, "newest first")
	require.Equal(t, "2030-01-01T00:00:00Z", l.Instances[0].WaitUntil.UTC().Format("2006-01-02T15:04:05Z"))
	require.Len(t, runJSON[list](t, append([]string{"processes", "list", "--limit", "1"}, db...)...).Instances, 1)
	require.Empty(t, runJSON[list](t, append([]string{"processes", "list", "--state", "succeeded"}, db...)...).Instances)

	d := runJSON[admin.ProcessDetail](t, append([]string{"processes", "show", "comms.send_email", "1"}, db...)...)
	require.Equal(t, "failed", d.Instance.State)
	require.Len(t, d.Attempts, 3)
	for i, a := range d.Attempts {
		require.Equal(t, i+1, a.N, "attempts are numbered 1..n")
		require.Equal(t, "failed", a.Outcome)
		require.NotNil(t, a.TaskID)
		require.Equal(t, "pending", *a.TaskStatus)
	}
	require.Equal(t, "started", d.Facts[0].Fact)
	require.Equal(t, "failed", d.Facts[len(d.Facts)-1].Fact)
	require.Empty(t, d.Tasks, "the send processes' supervisor runs as ticks: no task of this instance's own")

	d = runJSON[admin.ProcessDetail](t, append([]string{"processes", "show", "accounts.account_deletion", "1"}, db...)...)
	require.Len(t, d.Children, 1)
	require.Equal(t, "files.file_deletion", d.Children[0].Process)
	require.Nil(t, d.Instance.Attempts, "an account deletion has no attempts of its own")
}

// Bad input: a clear message and the exit code of its kind; nothing is read past it.
func TestProcessesCommandErrors(t *testing.T) {
	t.Parallel()
	db := []string{"--database-url", processFixture(t)}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"processes", "show", "comms.nope", "1"}, exitNotFound, `unknown process "comms.nope" (registered: accounts.account_anonymization, accounts.account_deletion, comms.send_email, comms.send_sms, files.file_deletion)`},
		{[]string{"processes", "show", "comms.send_email", "x"}, exitUsage, `instance id must be a positive integer, got "x"`},
		{[]string{"processes", "show", "comms.send_email", "0"}, exitUsage, `instance id must be a positive integer, got "0"`},
		{[]string{"processes", "show", "comms.send_email", "99"}, exitNotFound, "process instance not found: comms.send_email has no instance 99"},
		{[]string{"processes", "show", "comms.send_email"}, exitUsage, "accepts 2 arg(s), received 1"},
		{[]string{"processes", "list", "--state", "stuck"}, exitUsage, `--state must be one of running, waiting, succeeded, failed, timed_out, got "stuck"`},
		{[]string{"processes", "list", "--limit", "0"}, exitUsage, "--limit must be between 1 and 10000, got 0"},
		{[]string{"processes", "list", "--process", "x'; drop table queues.task; --"}, exitNotFound, `unknown process "x'; drop table queues.task; --"`},
	} {
		r := run(t, append(c.args, db...)...)
		require.Equal(t, c.code, r.code, "%v: %s", c.args, r.err)
		require.Contains(t, r.err, c.msg, c.args)
		require.Empty(t, r.out, c.args)
	}
}

// `processes retry`: a failed email restarted with a reason (text and JSON), then shown running
// with its earlier failure and the restart among its facts; each refusal has its exit code and
// message, and writes nothing.
func TestProcessesRetryCommand(t *testing.T) {
	t.Parallel()
	url := processFixture(t)
	db := []string{"--database-url", url}
	pool := openPool(t, url)
	// A process of one's own that registered no retry function.
	for _, sql := range []string{
		`create table public.noretry_task (noretry_task_id bigint primary key)`,
		`create view public.noretry_instances as select noretry_task_id as instance_id, 'running'::text as state,
			null::timestamptz as wait_until, null::integer as attempts, null::timestamptz as started_at, null::timestamptz as ended_at,
			null::text as error, null::text as parent_process, null::bigint as parent_id from public.noretry_task`,
		`select queues.register_process('public', 'noretry', 'No retry')`,
	} {
		_, err := pool.Exec(t.Context(), sql)
		require.NoError(t, err, sql)
	}

	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"processes", "retry", "comms.send_email", "1"}, exitUsage, "--reason is required"},
		{[]string{"processes", "retry", "comms.send_email", "1", "--reason", "  "}, exitUsage, "--reason is required"},
		{[]string{"processes", "retry", "comms.send_email", "x", "--reason", "why"}, exitUsage, `instance id must be a positive integer, got "x"`},
		{[]string{"processes", "retry", "comms.nope", "1", "--reason", "why"}, exitNotFound, "retry_process: unknown process 'comms.nope'"},
		{[]string{"processes", "retry", "comms.send_email", "99", "--reason", "why"}, exitNotFound, "comms.send_email has no instance 99"},
		{[]string{"processes", "retry", "comms.send_email", "2", "--reason", "why"}, exitState, "comms.send_email 2 is running, not failed; only a failed instance can be retried"},
		{[]string{"processes", "retry", "accounts.account_deletion", "1", "--reason", "why"}, exitState, "accounts.account_deletion 1 is running, not failed"},
		{[]string{"processes", "retry", "public.noretry", "1", "--reason", "why"}, exitState, "public.noretry cannot be retried by hand"},
	} {
		r := run(t, append(c.args, db...)...)
		require.Equal(t, c.code, r.code, "%v: %s", c.args, r.err)
		require.Contains(t, r.err, c.msg, c.args)
		require.Empty(t, r.out, c.args)
	}
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), `select count(*) from comms.send_email_task_restarted`).Scan(&n))
	require.Zero(t, n, "refusals write nothing")

	r := run(t, append([]string{"processes", "retry", "comms.send_email", "1", "--reason", "mailbox restored"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Regexp(t, `^restarted comms.send_email 1: run 2, by \S+: mailbox restored\n$`, r.out)

	d := runJSON[admin.ProcessDetail](t, append([]string{"processes", "show", "comms.send_email", "1"}, db...)...)
	require.Equal(t, "running", d.Instance.State)
	require.Len(t, d.Restarts, 1)
	require.Equal(t, "mailbox restored", d.Restarts[0].Reason)
	require.Len(t, d.EarlierFailures, 1)
	var facts []string
	for _, f := range d.Facts {
		facts = append(facts, f.Fact)
	}
	require.Equal(t, "failed (run 1)", facts[len(facts)-2])
	require.Equal(t, "restarted (run 2)", facts[len(facts)-1])

	again := run(t, append([]string{"processes", "retry", "comms.send_email", "1", "--reason", "twice", "--json"}, db...)...)
	require.Equal(t, exitState, again.code, "a restarted instance is running: %s", again.err)
}

// `processes retry accounts.account_deletion`: an account deletion failed on its file deletion
// (the facts its supervisors would record) is restarted, and its failed file deletion with it;
// `processes show` lists the restart and run 1's failure.
func TestProcessesRetryAccountDeletionCommand(t *testing.T) {
	t.Parallel()
	url := processFixture(t)
	db := []string{"--database-url", url}
	pool := openPool(t, url)
	for _, sql := range []string{
		`insert into files.file_deletion_task_failed (file_deletion_task_id, error_message)
		 values (1, 'file not deleted after 3 failed attempts (max 3); last error: storage: 503')`,
		`insert into accounts.account_deletion_task_failed (account_deletion_task_id, error_message)
		 values (1, 'account 1: file deletion stuck for file 1 (recordings/a.wav): storage: 503')`,
	} {
		_, err := pool.Exec(t.Context(), sql)
		require.NoError(t, err, sql)
	}

	r := run(t, append([]string{"processes", "retry", "accounts.account_deletion", "1", "--reason", "storage fixed"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Regexp(t, `^restarted accounts.account_deletion 1: run 2, by \S+: storage fixed\n$`, r.out)
	var reason string
	require.NoError(t, pool.QueryRow(t.Context(), `select reason from files.file_deletion_task_restarted where file_deletion_task_id = 1`).Scan(&reason))
	require.Equal(t, "account deletion 1 retried: storage fixed", reason)

	d := runJSON[admin.ProcessDetail](t, append([]string{"processes", "show", "accounts.account_deletion", "1"}, db...)...)
	require.NotEqual(t, "failed", d.Instance.State)
	require.Len(t, d.Restarts, 1)
	require.Equal(t, "storage fixed", d.Restarts[0].Reason)
	require.Len(t, d.EarlierFailures, 1)
	require.Contains(t, d.EarlierFailures[0].Error, "file deletion stuck")
}
