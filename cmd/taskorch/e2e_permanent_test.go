package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/admin"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/internal/testing/mtatest"
)

// A `taskorch worker` sending through a real mail server (Postfix, TASKORCH_EMAIL_PROVIDER=smtp):
// an email to a recipient the server does not have fails after exactly 1 of its 3 attempts;
// `taskorch processes show` and `processes list` say the failure was permanent. The operator
// corrects the address and `taskorch processes retry` sends it: the message arrives, and the
// instance shows both runs' attempts.
func TestE2EPermanentFailureShownAndRetried(t *testing.T) {
	t.Parallel()
	mta := mtatest.Start(t, "ann")
	url := dbtest.NewDBURL(t)
	db := []string{"--database-url", url}
	pool := openPool(t, url)
	startWorkerProc(t, url, "TASKORCH_PROCESSES=comms", "TASKORCH_EMAIL_PROVIDER=smtp",
		"TASKORCH_SMTP_URL="+mta.URL(), "TASKORCH_EMAIL_FROM=noreply@sender.test")
	waitFor(t, pool, "the comms process installed", `select to_regprocedure('comms.send_email(text,text,text,text,timestamptz)') is not null`)
	_, err := pool.Exec(t.Context(), `update comms.process_config set backoff_base = '100 ms', check_interval = '500 ms'`)
	require.NoError(t, err)

	id := q[int64](t, pool, `select comms.send_email($1, 'Welcome', 'Hello')`, mta.Address("bob"))
	waitFor(t, pool, "the email failed", `select exists (select 1 from comms.send_email_task_failed where send_email_task_id = $1)`, id)
	require.Equal(t, 1, q[int](t, pool, `select comms.count_send_email_attempts($1)`, id), "exactly 1 attempt of 3")
	sid := strconv.FormatInt(id, 10)

	r := run(t, append([]string{"processes", "show", "comms.send_email", sid}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	t.Logf("taskorch processes show comms.send_email %s:\n%s", sid, r.out)
	require.Regexp(t, `(?m)^state\s+failed \(a permanent failure: not retried\)$`, r.out)
	require.Regexp(t, `(?m)^error\s+permanent: email not sent: email provider: smtp: 550: .*5\.1\.1 <bob@taskorch\.test>: Recipient address rejected`, r.out)
	require.Regexp(t, `(?m)^\s+1\s.*\sfailed \(permanent\)\s`, r.out)
	require.Contains(t, r.out, "attempt 1 failed (permanent)")
	d := runJSON[admin.ProcessDetail](t, append([]string{"processes", "show", "comms.send_email", sid}, db...)...)
	require.True(t, d.Permanent)
	require.Len(t, d.Attempts, 1)
	require.Equal(t, "permanent", *d.Attempts[0].ErrorClass)
	list := run(t, append([]string{"processes", "list", "--state", "failed", "--process", "comms.send_email"}, db...)...)
	require.Equal(t, 0, list.code, list.err)
	require.Contains(t, list.out, "permanent: email not sent")

	// The address was wrong: corrected, the instance is retried by hand and sent.
	_, err = pool.Exec(t.Context(), `update comms.email_message m set to_address = $2 from comms.send_email_task t
		where t.send_email_task_id = $1 and m.message_id = t.message_id`, id, mta.Address("ann"))
	require.NoError(t, err)
	r = run(t, append([]string{"processes", "retry", "comms.send_email", sid, "--reason", "address corrected"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	waitFor(t, pool, "the email sent", `select exists (select 1 from comms.send_email_task_succeeded where send_email_task_id = $1)`, id)
	msgs := mta.WaitMessages(t, "ann", 1)
	require.Len(t, msgs, 1)
	require.Contains(t, msgs[0], "Subject: Welcome")

	d = runJSON[admin.ProcessDetail](t, append([]string{"processes", "show", "comms.send_email", sid}, db...)...)
	require.Equal(t, "succeeded", d.Instance.State)
	require.False(t, d.Permanent)
	require.Len(t, d.Attempts, 2)
	require.Equal(t, "permanent", *d.Attempts[0].ErrorClass)
	require.Equal(t, "succeeded", d.Attempts[1].Outcome)
	require.Len(t, d.EarlierFailures, 1)
	require.True(t, strings.HasPrefix(d.EarlierFailures[0].Error, "permanent: email not sent: "), d.EarlierFailures[0].Error)
}
