package processtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// repairable is an email provider that fails until fixed; once fixed, each call waits for the
// test's release (so the test sees the attempt at the provider) and then succeeds.
type repairable struct {
	fixed   atomic.Bool
	held    chan struct{}
	release chan struct{}
}

func newRepairable() *repairable {
	return &repairable{held: make(chan struct{}, 16), release: make(chan struct{})}
}

func (r *repairable) Call(ctx context.Context, _ taskorch.ChannelCall) (json.RawMessage, error) {
	if !r.fixed.Load() {
		return nil, errors.New("smtp: 554 mailbox unavailable")
	}
	r.held <- struct{}{}
	select {
	case <-r.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return json.RawMessage(`{"id":"ok"}`), nil
}

// failedEmail sends an email that fails every allowed attempt and waits for its terminal
// failure.
func failedEmail(t *testing.T, pool *pgxpool.Pool, to string) int64 {
	t.Helper()
	id := scalar[int64](t, pool, `select comms.send_email($1, 'Hi', 'text')`, to)
	waitTrue(t, pool, "the terminal failure fact",
		`select exists (select 1 from comms.send_email_task_failed where send_email_task_id = $1)`, id)
	quiet(t, pool, "send_email_task_id", id)
	return id
}

// A failed email retried by hand: the same root, a restart fact with the reason and who, the
// instance running again with attempt 3 at the provider (1 and 2 were run 1's), then succeeded
// with one terminal fact per run; the failed fact stays; the attempt budget restarted.
func TestRetryFailedEmailSucceeds(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 2)
	email := newRepairable()
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: email})
	id := failedEmail(t, pool, "ann@example.com")
	require.Equal(t, "failed", getInstance(t, pool, "comms.send_email", id).State)

	email.fixed.Store(true)
	var (
		process, reason, by string
		instanceID          int64
		run                 int
	)
	require.NoError(t, pool.QueryRow(context.Background(),
		`select process, instance_id, run, reason, restarted_by from queues.retry_process('comms.send_email', $1, '  provider fixed ')`, id).
		Scan(&process, &instanceID, &run, &reason, &by))
	require.Equal(t, "comms.send_email", process)
	require.Equal(t, id, instanceID)
	require.Equal(t, 2, run)
	require.Equal(t, "provider fixed", reason)
	require.Equal(t, scalar[string](t, pool, `select session_user::text`), by)

	<-email.held // the new attempt is at the provider
	x := getInstance(t, pool, "comms.send_email", id)
	require.Equal(t, "running", x.State)
	require.EqualValues(t, 3, *x.Attempts, "attempts number on after the restart")
	require.Nil(t, x.Error)
	require.Equal(t, []string{"running"}, scalar[[]string](t, pool,
		`select array_agg(state) from queues.process_instances(_process => 'comms.send_email', _limit => 10000) where instance_id = $1`, id),
		"listed once, as running, not failed")
	close(email.release)

	waitTrue(t, pool, "the new run's success",
		`select exists (select 1 from comms.send_email_task_succeeded where send_email_task_id = $1)`, id)
	quiet(t, pool, "send_email_task_id", id)
	x = getInstance(t, pool, "comms.send_email", id)
	require.Equal(t, "succeeded", x.State)
	require.EqualValues(t, 3, *x.Attempts)
	require.Equal(t, 1, scalar[int](t, pool, `select count(*)::int from comms.send_email_task where send_email_task_id = $1`, id), "same root")
	require.Equal(t, []int32{1}, scalar[[]int32](t, pool,
		`select array_agg(run order by run) from comms.send_email_task_failed where send_email_task_id = $1`, id), "run 1's failure stays")
	require.Equal(t, 1, scalar[int](t, pool, `select comms.count_send_email_attempts($1)`, id), "the current run's attempts")
	require.Equal(t, 0, scalar[int](t, pool, `select comms.count_send_email_failed_attempts($1)`, id))
	require.False(t, scalar[bool](t, pool, `select comms.is_send_email_stuck($1)`, id))
}

// A retried instance that fails again records its second failure, as run 2's, with the run's
// own attempt count; it can be retried again.
func TestRetrySecondFailureRecorded(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 2)
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: newRepairable()})
	id := failedEmail(t, pool, "bob@example.com")

	mustExec(t, pool, `select queues.retry_process('comms.send_email', $1, 'try once more')`, id)
	waitTrue(t, pool, "run 2's failure",
		`select exists (select 1 from comms.send_email_task_failed where send_email_task_id = $1 and run = 2)`, id)
	quiet(t, pool, "send_email_task_id", id)

	require.Equal(t, []string{
		"email not sent after 2 failed attempts (max 2); last error: email provider: smtp: 554 mailbox unavailable",
		"email not sent after 2 failed attempts (max 2); last error: email provider: smtp: 554 mailbox unavailable",
	}, scalar[[]string](t, pool, `select array_agg(error_message order by run) from comms.send_email_task_failed where send_email_task_id = $1`, id))
	x := getInstance(t, pool, "comms.send_email", id)
	require.Equal(t, "failed", x.State)
	require.EqualValues(t, 4, *x.Attempts)
	require.Equal(t, 3, scalar[int](t, pool, `select run from queues.retry_process('comms.send_email', $1, 'and again')`, id))
}

func pgCode(t *testing.T, err error) string {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	return pgErr.Code
}

// Every refusal raises a readable error with its own SQLSTATE and writes nothing: no reason,
// unknown process, a process without retry, no such instance, a running, a waiting and a
// succeeded instance.
func TestRetryRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 1)
	b := &byAddress{held: make(chan struct{}, 1), release: make(chan struct{})}
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: b})
	t.Cleanup(func() { close(b.release) }) // before the worker stops (cleanups run last first)

	failed := failedEmail(t, pool, "gone@example.com")
	sent := scalar[int64](t, pool, `select comms.send_email('ok@example.com', 'Hi', 'text')`)
	waitTrue(t, pool, "sent", `select exists (select 1 from comms.send_email_task_succeeded where send_email_task_id = $1)`, sent)
	running := scalar[int64](t, pool, `select comms.send_email('slow@example.com', 'Hi', 'text')`)
	<-b.held
	waiting := scalar[int64](t, pool, `select comms.send_email('later@example.com', 'Hi', 'text', _scheduled_at => now() + interval '1 day')`)
	// A process of one's own that registered no retry function.
	mustExec(t, pool, `create table public.noretry_task (noretry_task_id bigint primary key)`)
	mustExec(t, pool, `create view public.noretry_instances as select noretry_task_id as instance_id, 'running'::text as state,
		null::timestamptz as wait_until, null::integer as attempts, null::timestamptz as started_at, null::timestamptz as ended_at,
		null::text as error, null::text as parent_process, null::bigint as parent_id from public.noretry_task`)
	mustExec(t, pool, `select queues.register_process('public', 'noretry', 'No retry')`)

	for _, c := range []struct {
		process string
		id      int64
		reason  any
		code    string
		msg     string
	}{
		{"comms.send_email", failed, nil, "22023", "retry_process: a reason is required"},
		{"comms.send_email", failed, "", "22023", "retry_process: a reason is required"},
		{"comms.send_email", failed, "   ", "22023", "retry_process: a reason is required"},
		{"comms.nope", failed, "why", "42704", "retry_process: unknown process 'comms.nope'; registered: accounts.account_anonymization, "},
		{"public.noretry", 1, "why", "0A000", "retry_process: public.noretry cannot be retried by hand"},
		{"comms.send_email", 999999, "why", "P0002", "retry_send_email: comms.send_email has no instance 999999"},
		{"comms.send_email", sent, "why", "55000", "succeeded; only a failed instance can be retried"},
		{"comms.send_email", running, "why", "55000", "is running, not failed; only a failed instance can be retried"},
		{"comms.send_email", waiting, "why", "55000", "is running, not failed; only a failed instance can be retried"},
	} {
		_, err := pool.Exec(ctx, `select queues.retry_process($1, $2, $3)`, c.process, c.id, c.reason)
		require.Error(t, err, c)
		require.Equal(t, c.code, pgCode(t, err), c)
		require.ErrorContains(t, err, c.msg, c)
	}
	require.Equal(t, 0, scalar[int](t, pool, `select count(*)::int from comms.send_email_task_restarted`), "nothing written")
	require.Equal(t, "failed", getInstance(t, pool, "comms.send_email", failed).State)
}

// Two operators retry the same failed instance at once, on two connections: one restart; the
// other waits for the first's lock and is refused, the instance running by then.
func TestRetryConcurrentOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 1)
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: newRepairable()})
	id := failedEmail(t, pool, "cy@example.com")
	mustExec(t, pool, `update comms.process_config set backoff_base = '1 hour', backoff_max = '1 hour' where process = 'send_email'`)

	first, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = first.Rollback(ctx) }()
	require.Equal(t, 2, scalar[int](t, first, `select run from queues.retry_process('comms.send_email', $1, 'first')`, id))

	second, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer second.Release()
	pid := scalar[int32](t, second, `select pg_backend_pid()`)
	done := make(chan error, 1)
	go func() {
		_, err := second.Exec(ctx, `select queues.retry_process('comms.send_email', $1, 'second')`, id)
		done <- err
	}()
	// The barrier: the second retry is waiting for the first's row lock.
	waitTrue(t, pool, "the second retry to wait for the first's lock",
		`select exists (select 1 from pg_stat_activity where pid = $1 and wait_event_type = 'Lock')`, pid)
	require.NoError(t, first.Commit(ctx))
	err = <-done
	require.Equal(t, "55000", pgCode(t, err))
	require.ErrorContains(t, err, "is running, not failed")
	require.Equal(t, []string{"first"}, scalar[[]string](t, pool,
		`select array_agg(reason) from comms.send_email_task_restarted where send_email_task_id = $1`, id))
}

// A stuck file deletion retried by hand deletes the file: the same kit, files.file_deletion.
func TestRetryFileDeletion(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 1)
	del := newRepairable()
	close(del.release)
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeFileDelete: del})
	file := scalar[int64](t, pool, `insert into files.file (bucket, object_key) values ('b', 'k') returning file_id`)
	id := scalar[int64](t, pool, `select file_deletion_task_id from files.kickoff_file_deletion($1)`, file)
	waitTrue(t, pool, "the terminal failure", `select exists (select 1 from files.file_deletion_task_failed where file_deletion_task_id = $1)`, id)
	quiet(t, pool, "file_deletion_task_id", id)
	require.True(t, scalar[bool](t, pool, `select files.is_file_deletion_stuck($1)`, file))

	del.fixed.Store(true)
	mustExec(t, pool, `select queues.retry_process('files.file_deletion', $1, 'bucket policy fixed')`, id)
	waitTrue(t, pool, "the file deleted", `select (metadata ->> 'deleted')::boolean is true from files.file where file_id = $1`, file)
	require.Equal(t, "succeeded", getInstance(t, pool, "files.file_deletion", id).State)
	require.False(t, scalar[bool](t, pool, `select files.is_file_deletion_stuck($1)`, file))
}
