package processtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// byAddress is an email provider that answers by recipient: "gone@" fails every time, "slow@"
// is held until the test ends (its attempt stays outstanding), anything else is sent.
type byAddress struct {
	held    chan struct{} // receives once per held call
	release chan struct{}
}

func (b *byAddress) Call(ctx context.Context, c taskorch.ChannelCall) (json.RawMessage, error) {
	var req struct {
		To string `json:"to"`
	}
	if err := json.Unmarshal(c.Request, &req); err != nil {
		return nil, taskorch.Discard(err)
	}
	switch req.To {
	case "gone@example.com":
		return nil, errors.New("smtp: 554 mailbox unavailable")
	case "slow@example.com":
		select {
		case b.held <- struct{}{}:
		default:
		}
		select {
		case <-b.release:
		case <-ctx.Done():
		}
		return nil, errors.New("released")
	}
	return json.RawMessage(`{"id":"ok"}`), nil
}

type instance struct {
	State     string
	WaitUntil *time.Time
	Attempts  *int32
	EndedAt   *time.Time
	Error     *string
	Parent    *string
	ParentID  *int64
}

func getInstance(t *testing.T, pool *pgxpool.Pool, process string, id int64) instance {
	t.Helper()
	var x instance
	require.NoError(t, pool.QueryRow(context.Background(), `
		select state, wait_until, attempts, ended_at, error, parent_process, parent_id
		from queues.process_instances(_process => $1, _limit => 10000) where instance_id = $2`, process, id).
		Scan(&x.State, &x.WaitUntil, &x.Attempts, &x.EndedAt, &x.Error, &x.Parent, &x.ParentID))
	return x
}

// With real workers: an email that fails three times is 'failed' with its error; one whose
// attempt is at the provider is 'running'; one scheduled for later and an SMS backing off after
// a failure are 'waiting' until the time of their next run; a sent one is 'succeeded'. The
// state filter and the counts agree.
func TestProcessInstanceStates(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 3)
	mustExec(t, pool, `update comms.process_config set backoff_base = '1 hour', backoff_max = '1 hour' where process = 'send_sms'`)
	email := &byAddress{held: make(chan struct{}, 1), release: make(chan struct{})}
	sms := &scripted{failures: []error{errors.New("twilio: 500")}}
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: email, taskorch.TypeSMS: sms})
	t.Cleanup(func() { close(email.release) }) // before the worker stops (cleanups run last first)

	gone := scalar[int64](t, pool, `select comms.send_email('gone@example.com', 'Hi', 'text')`)
	sent := scalar[int64](t, pool, `select comms.send_email('ann@example.com', 'Hi', 'text')`)
	later := scalar[time.Time](t, pool, `select now() + interval '1 hour'`)
	scheduled := scalar[int64](t, pool, `select comms.send_email('bob@example.com', 'Later', 'text', null, $1)`, later)
	slow := scalar[int64](t, pool, `select comms.send_email('slow@example.com', 'Hi', 'text')`)
	backingOff := scalar[int64](t, pool, `select comms.send_sms('+15550100', 'code 1234')`)

	waitTrue(t, pool, "the terminal failure", `select exists (select 1 from comms.send_email_task_failed where send_email_task_id = $1)`, gone)
	waitTrue(t, pool, "sent", `select exists (select 1 from comms.send_email_task_succeeded where send_email_task_id = $1)`, sent)
	<-email.held
	waitTrue(t, pool, "the SMS's failure", `select comms.count_send_sms_failed_attempts($1) = 1`, backingOff)

	x := getInstance(t, pool, "comms.send_email", gone)
	require.Equal(t, "failed", x.State)
	require.EqualValues(t, 3, *x.Attempts)
	require.NotNil(t, x.EndedAt)
	require.Nil(t, x.WaitUntil)
	require.Contains(t, *x.Error, "email not sent after 3 failed attempts (max 3); last error: email provider: smtp: 554 mailbox unavailable")

	x = getInstance(t, pool, "comms.send_email", sent)
	require.Equal(t, "succeeded", x.State)
	require.EqualValues(t, 1, *x.Attempts)
	require.Nil(t, x.Error)

	x = getInstance(t, pool, "comms.send_email", scheduled)
	require.Equal(t, "waiting", x.State)
	require.WithinDuration(t, later, *x.WaitUntil, time.Millisecond, "waits until its scheduled time")
	require.EqualValues(t, 0, *x.Attempts)

	x = getInstance(t, pool, "comms.send_email", slow)
	require.Equal(t, "running", x.State, "its attempt is at the provider")
	require.EqualValues(t, 1, *x.Attempts)
	require.Nil(t, x.WaitUntil)

	// The SMS backs off for an hour after its failure: waiting until the retry the supervisor
	// scheduled, once the supervisor run that scheduled it has finished.
	waitTrue(t, pool, "the SMS to wait", `select state = 'waiting' from queues.process_instances(_process => 'comms.send_sms') where instance_id = $1`, backingOff)
	x = getInstance(t, pool, "comms.send_sms", backingOff)
	retryAt := scalar[time.Time](t, pool, `select f.created_at + interval '1 hour' from comms.send_sms_attempt a
		join comms.send_sms_attempt_failed f using (send_sms_attempt_id) where a.send_sms_task_id = $1`, backingOff)
	require.WithinDuration(t, retryAt, *x.WaitUntil, time.Millisecond)

	require.Equal(t, []int64{gone}, scalar[[]int64](t, pool,
		`select array_agg(instance_id) from queues.process_instances('failed') where process = 'comms.send_email'`))
	require.ElementsMatch(t, []int64{scheduled}, scalar[[]int64](t, pool,
		`select array_agg(instance_id) from queues.process_instances('waiting', _process => 'comms.send_email')`))
	var running, waiting, succeeded, failed, timedOut int64
	require.NoError(t, pool.QueryRow(context.Background(), `select running, waiting, succeeded, failed, timed_out
		from queues.process_instance_counts() where process = 'comms.send_email'`).Scan(&running, &waiting, &succeeded, &failed, &timedOut))
	require.Equal(t, []int64{1, 1, 1, 1, 0}, []int64{running, waiting, succeeded, failed, timedOut}, "no wait step: nothing times out")
	require.Equal(t, int64(1), scalar[int64](t, pool, `select failed from queues.process_instance_counts(1) where process = 'comms.send_email'`))
	require.Equal(t, "<nil> 1", scalar[string](t, pool, `select coalesce(running::text, '<nil>') || ' ' || failed
		from queues.process_instance_counts(10, '{failed}') where process = 'comms.send_email'`), "only the states asked for are counted")
	require.Equal(t, 2, scalar[int](t, pool, `select count(*)::int from queues.process_instances(_limit => 2)`), "the limit is overall")
}

// An account deletion's children name it: each file deletion of its files and its
// anonymization have parent_process 'accounts.account_deletion' and its id; the deletion itself
// has no attempts (NULL).
func TestAccountDeletionChildrenNameTheirParent(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 3)
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeFileDelete: &scripted{}})
	account, files := newAccount(t, pool, 2)
	id := scalar[int64](t, pool, `select account_deletion_task_id from api.request_account_deletion($1)`, account)
	waitTrue(t, pool, "account_deletion_task_succeeded",
		`select exists (select 1 from accounts.account_deletion_task_succeeded where account_deletion_task_id = $1)`, id)

	x := getInstance(t, pool, "accounts.account_deletion", id)
	require.Equal(t, "succeeded", x.State)
	require.Nil(t, x.Attempts)
	require.Nil(t, x.Parent)

	children := scalar[[]string](t, pool, `
		select array_agg(process || ' ' || state || ' ' || parent_process || ' ' || parent_id order by process, instance_id)
		from queues.process_instances() where parent_id is not null`)
	want := []string{"accounts.account_anonymization succeeded accounts.account_deletion " + itoa(id)}
	for range files {
		want = append(want, "files.file_deletion succeeded accounts.account_deletion "+itoa(id))
	}
	require.Equal(t, want, children)

	// A file deletion of a file nobody is deleting the account of has no parent.
	other := scalar[int64](t, pool, `insert into files.file (bucket, object_key) values ('b', 'k') returning file_id`)
	fd := scalar[int64](t, pool, `select file_deletion_task_id from files.kickoff_file_deletion($1)`, other)
	x = getInstance(t, pool, "files.file_deletion", fd)
	require.Nil(t, x.Parent)
	require.Nil(t, x.ParentID)
}

// Bad input to the registry and the listings: a clear invalid_parameter_value naming the
// problem, and nothing written.
func TestProcessRegistryBadInput(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ctx := context.Background()
	before := scalar[int](t, pool, `select count(*)::int from queues.process`)
	mustExec(t, pool, `create schema biz; create table biz.thing_task (thing_task_id bigint primary key);
		create table biz.half_task (half_task_id bigint primary key);
		create view biz.half_instances as select 1::bigint as instance_id, 'running'::text as state`)
	for sql, msg := range map[string]string{
		`select queues.register_process('Biz', 'thing', 'T')`:               "schema must be a lowercase SQL identifier, got 'Biz'",
		`select queues.register_process('biz', 'x;drop', 'T')`:              "name must be a lowercase SQL identifier",
		`select queues.register_process('biz', 'thing', ' ')`:               "title must be 1 to 200 characters",
		`select queues.register_process('biz', 'nothing', 'T')`:             "biz.nothing has no root table biz.nothing_task",
		`select queues.register_process('biz', 'thing', 'T')`:               "create the view biz.thing_instances first",
		`select queues.register_process('biz', 'half', 'T')`:                "lacks the columns (or types) wait_until timestamp with time zone, attempts integer",
		`select * from queues.process_instances('stuck')`:                   "state must be running, waiting, succeeded, failed or timed_out, got 'stuck'",
		`select * from queues.process_instances(null, 0)`:                   "limit must be between 1 and 10000, got 0",
		`select * from queues.process_instances(null, 10, 'biz.x')`:         "unknown process 'biz.x'; registered: accounts.account_anonymization",
		`select * from queues.process_instances(null, 10, 'x''; --')`:       `unknown process 'x''; --'`,
		`select * from queues.process_instance_counts(0)`:                   "cap must be between 1 and 1000000, got 0",
		`select * from queues.process_instance_counts(10, '{failed,lost}')`: "states must be among running, waiting, succeeded, failed, timed_out, got {failed,lost}",
	} {
		_, err := pool.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, sql)
		require.Equal(t, "22023", pgErr.Code, sql)
		require.Contains(t, pgErr.Message, msg, sql)
	}
	require.Equal(t, before, scalar[int](t, pool, `select count(*)::int from queues.process`), "nothing registered")
}
