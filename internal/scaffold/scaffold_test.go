package scaffold_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/scaffold"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m, dbtest.CoreOptions()) }

func scalar[T any](t *testing.T, pool *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&v))
	return v
}

// apply renders p, applies it as psql would (one script) and speeds the process up for a test.
func apply(t *testing.T, p scaffold.Process) *pgxpool.Pool {
	t.Helper()
	sql, err := scaffold.Render(p)
	require.NoError(t, err)
	pool := dbtest.NewDB(t)
	_, err = pool.Exec(context.Background(), string(sql))
	require.NoError(t, err, "the generated SQL applies")
	_, err = pool.Exec(context.Background(), `update `+p.Schema+`.process_config set backoff_base = '20 ms', backoff_max = '50 ms', check_interval = '200 ms'`)
	require.NoError(t, err)
	return pool
}

func run(t *testing.T, pool *pgxpool.Pool, channels map[string]taskorch.ChannelProvider) {
	t.Helper()
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		Channels: channels, PollInterval: 20 * time.Millisecond, MaxPollInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func waitTrue(t *testing.T, pool *pgxpool.Pool, what, sql string, args ...any) {
	t.Helper()
	require.Eventually(t, func() bool { return scalar[bool](t, pool, sql, args...) }, 30*time.Second, 10*time.Millisecond, what)
}

// A generated pure-SQL process, applied as written (TODOs untouched), runs end to end.
func TestGeneratedDBFunctionProcess(t *testing.T) {
	t.Parallel()
	p := scaffold.Process{Name: "rebuild_summary", Schema: "reports", Key: "account_id"}
	pool := apply(t, p)
	run(t, pool, nil)

	id := scalar[int64](t, pool, `select rebuild_summary_task_id from reports.kickoff_rebuild_summary(7)`)
	require.Equal(t, id, scalar[int64](t, pool, `select rebuild_summary_task_id from reports.kickoff_rebuild_summary(7)`), "idempotent")
	require.Equal(t, "kickoff_rebuild_summary: account_id is required",
		scalar[string](t, pool, `select validation_failure_message from reports.kickoff_rebuild_summary(null)`))
	waitTrue(t, pool, "terminal success", `select exists (select 1 from reports.rebuild_summary_task_succeeded where rebuild_summary_task_id = $1)`, id)
	require.Equal(t, 1, scalar[int](t, pool, `select reports.count_rebuild_summary_attempts($1)`, id))
	require.Equal(t, `{"account_id": 7}`, scalar[string](t, pool, `select result::text from reports.rebuild_summary_attempt_succeeded`))

	// Filling the TODO with work that fails: retried up to max attempts, then stuck and terminal.
	_, err := pool.Exec(context.Background(), `create or replace function reports.rebuild_summary_attempt_work(_account_id bigint, _attempt_id bigint)
		returns jsonb language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
		begin raise exception 'summary source unavailable for %', _account_id; end $$`)
	require.NoError(t, err)
	id = scalar[int64](t, pool, `select rebuild_summary_task_id from reports.kickoff_rebuild_summary(8)`)
	waitTrue(t, pool, "terminal failure", `select exists (select 1 from reports.rebuild_summary_task_failed where rebuild_summary_task_id = $1)`, id)
	require.True(t, scalar[bool](t, pool, `select reports.is_rebuild_summary_stuck($1)`, id))
	require.Equal(t, 3, scalar[int](t, pool, `select reports.count_rebuild_summary_failed_attempts($1)`, id))
	require.Contains(t, scalar[string](t, pool, `select error_message from reports.rebuild_summary_task_failed`),
		"rebuild_summary gave up after 3 failed attempts (max 3); last error: summary source unavailable for 8")

	// The process registered itself: its instances are listed with their state.
	require.Equal(t, "Rebuild summary", scalar[string](t, pool, `select title from queues.process where process = 'reports.rebuild_summary'`))
	require.Equal(t, []string{"failed 3 rebuild_summary gave up after 3 failed attempts (max 3); last error: summary source unavailable for 8", "succeeded 1 "}, scalar[[]string](t, pool, `
		select array_agg(state || ' ' || attempts || ' ' || coalesce(error, '') order by instance_id desc)
		from queues.process_instances(_process => 'reports.rebuild_summary')`))
}

// A generated channel process runs through the before/success/error handlers: one failure at
// the provider, then success.
func TestGeneratedChannelProcess(t *testing.T) {
	t.Parallel()
	p := scaffold.Process{Name: "send_reminder", Schema: "crm", Key: "customer_id", Channel: taskorch.TypeEmail, MaxAttempts: 2}
	pool := apply(t, p)
	var calls atomic.Int32
	var lastReq atomic.Value
	run(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: taskorch.ChannelProviderFunc(
		func(_ context.Context, c taskorch.ChannelCall) (json.RawMessage, error) {
			lastReq.Store(string(c.Request))
			if calls.Add(1) == 1 {
				return nil, errors.New("provider down")
			}
			return json.RawMessage(`{"id":"m-1"}`), nil
		})})

	id := scalar[int64](t, pool, `select send_reminder_task_id from crm.kickoff_send_reminder(42)`)
	waitTrue(t, pool, "terminal success", `select exists (select 1 from crm.send_reminder_task_succeeded where send_reminder_task_id = $1)`, id)
	require.Equal(t, 2, scalar[int](t, pool, `select crm.count_send_reminder_attempts($1)`, id))
	require.Equal(t, 1, scalar[int](t, pool, `select crm.count_send_reminder_failed_attempts($1)`, id))
	require.EqualValues(t, 2, calls.Load())
	require.Contains(t, lastReq.Load().(string), `"customer_id": 42`)
	require.Equal(t, `{"id": "m-1"}`, scalar[string](t, pool, `select result::text from crm.send_reminder_attempt_succeeded`))
	require.Equal(t, "succeeded 2", scalar[string](t, pool, `
		select state || ' ' || attempts from queues.process_instances(_process => 'crm.send_reminder') where instance_id = $1`, id))
	require.Equal(t, int64(1), scalar[int64](t, pool, `select succeeded from queues.process_instance_counts() where process = 'crm.send_reminder'`))
}

// A generated channel process can be retried by hand (docs/processes.md, "Retrying a failed
// process"): it fails its two attempts, queues.retry_process restarts it, and the new run's
// attempt succeeds; run 1's failure stays.
func TestGeneratedChannelProcessRetriedByHand(t *testing.T) {
	t.Parallel()
	p := scaffold.Process{Name: "send_reminder", Schema: "crm", Key: "customer_id", Channel: taskorch.TypeEmail, MaxAttempts: 2}
	pool := apply(t, p)
	var calls atomic.Int32
	run(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: taskorch.ChannelProviderFunc(
		func(_ context.Context, _ taskorch.ChannelCall) (json.RawMessage, error) {
			if calls.Add(1) <= 2 {
				return nil, errors.New("provider down")
			}
			return json.RawMessage(`{"id":"m-1"}`), nil
		})})

	id := scalar[int64](t, pool, `select send_reminder_task_id from crm.kickoff_send_reminder(42)`)
	waitTrue(t, pool, "terminal failure", `select exists (select 1 from crm.send_reminder_task_failed where send_reminder_task_id = $1)`, id)
	require.Equal(t, 2, scalar[int](t, pool, `select run from queues.retry_process('crm.send_reminder', $1, 'provider is back')`, id))
	waitTrue(t, pool, "terminal success", `select exists (select 1 from crm.send_reminder_task_succeeded where send_reminder_task_id = $1)`, id)
	require.Equal(t, "succeeded 3", scalar[string](t, pool, `
		select state || ' ' || attempts from queues.process_instances(_process => 'crm.send_reminder') where instance_id = $1`, id))
	require.Equal(t, 1, scalar[int](t, pool, `select count(*)::int from crm.send_reminder_task_failed where send_reminder_task_id = $1 and run = 1`, id))
	require.Equal(t, "provider is back", scalar[string](t, pool, `select reason from crm.send_reminder_task_restarted where send_reminder_task_id = $1`, id))
}

// What the generated SQL grants: nothing to PUBLIC, the supervisor and handlers to the worker.
func TestGeneratedGrants(t *testing.T) {
	t.Parallel()
	for _, p := range []scaffold.Process{
		{Name: "purge_data", Schema: "gdpr"},
		{Name: "send_invoice", Schema: "billing", Channel: taskorch.TypeEmail},
	} {
		pool := apply(t, p)
		require.Empty(t, scalar[[]string](t, pool, `
			select coalesce(array_agg(p.oid::regprocedure::text), '{}') from pg_proc p join pg_namespace n on n.oid = p.pronamespace
			where n.nspname = $1 and (p.proacl is null or exists (select 1 from aclexplode(p.proacl) a where a.grantee = 0))`, p.Schema))
		require.Empty(t, scalar[[]string](t, pool, `
			select coalesce(array_agg(c.oid::regclass::text), '{}') from pg_class c join pg_namespace n on n.oid = c.relnamespace
			where n.nspname = $1 and c.relkind in ('r', 'v')
			  and (has_table_privilege('worker_service_user', c.oid, 'select')
			       or exists (select 1 from aclexplode(c.relacl) a where a.grantee = 0))`, p.Schema),
			"tables and views (the instances view too) the worker or PUBLIC can read")
		require.Equal(t, p.Schema+"."+p.Name, scalar[string](t, pool, `select process from queues.process`), "registered")
		granted := scalar[[]string](t, pool, `
			select coalesce(array_agg(p.proname::text order by p.proname), '{}') from pg_proc p join pg_namespace n on n.oid = p.pronamespace
			where n.nspname = $1 and has_function_privilege('worker_service_user', p.oid, 'execute')`, p.Schema)
		if p.Channel == "" {
			require.Equal(t, []string{"purge_data_supervisor"}, granted)
		} else {
			require.Equal(t, []string{"get_send_invoice_payload", "record_send_invoice_failure", "record_send_invoice_success", "send_invoice_supervisor"}, granted)
		}
	}
}

func TestRenderRefusesBadNames(t *testing.T) {
	t.Parallel()
	for _, p := range []scaffold.Process{
		{Name: ""},
		{Name: "Robert'); drop table students;--"},
		{Name: "ok", Schema: "queues"},
		{Name: "ok", Schema: "a-b"},
		{Name: "ok", Key: "id; drop"},
		{Name: "ok", Channel: "email'"},
		{Name: "a_name_that_is_far_too_long_for_postgres"},
		{Name: "ok", MaxAttempts: -1},
	} {
		_, err := scaffold.Render(p)
		require.ErrorIs(t, err, scaffold.ErrInvalid, "%+v", p)
	}
}

// A generated channel process with a wait step: after the provider accepted the attempt, the
// process waits for its signal, keyed by the key the kickoff named; queues.signal ends it at
// once, and without a signal the wait ends timed_out: an outcome, not a failure.
func TestGeneratedChannelProcessWaitsForSignal(t *testing.T) {
	t.Parallel()
	accept := map[string]taskorch.ChannelProvider{taskorch.TypeEmail: taskorch.ChannelProviderFunc(
		func(context.Context, taskorch.ChannelCall) (json.RawMessage, error) {
			return json.RawMessage(`{"id":"m-1"}`), nil
		})}
	accepted := `select exists (select 1 from crm.confirm_email_attempt a join crm.confirm_email_attempt_succeeded s
		using (confirm_email_attempt_id) where a.confirm_email_task_id = $1)`
	terminal := `select (select count(*) from crm.confirm_email_task_succeeded where confirm_email_task_id = $1)
		+ (select count(*) from crm.confirm_email_task_failed where confirm_email_task_id = $1)
		+ (select count(*) from crm.confirm_email_task_timed_out where confirm_email_task_id = $1)`

	t.Run("signalled", func(t *testing.T) {
		t.Parallel()
		p := scaffold.Process{Name: "confirm_email", Schema: "crm", Key: "signup_id", Channel: taskorch.TypeEmail,
			WaitSignal: "email.confirmed", WaitTimeout: "1 hour"}
		pool := apply(t, p)
		run(t, pool, accept)
		id := scalar[int64](t, pool, `select confirm_email_task_id from crm.kickoff_confirm_email(7)`)
		waitTrue(t, pool, "the provider accepted the attempt", accepted, id)
		require.Zero(t, scalar[int64](t, pool, terminal, id), "the process waits for its signal")
		require.True(t, scalar[bool](t, pool, `select due_at > now() + interval '50 minutes' from crm.confirm_email_due where confirm_email_task_id = $1`, id))
		require.True(t, scalar[bool](t, pool, `select state = 'waiting' and wait_until > now() + interval '50 minutes'
			from crm.confirm_email_instances where instance_id = $1`, id), "the instances view says it waits, and until when")

		require.True(t, scalar[bool](t, pool, `select queues.signal('email.confirmed', '7', '{"ip": "203.0.113.7"}')`), "keyed by the signup_id")
		waitTrue(t, pool, "the signal ends the process", `select exists (select 1 from crm.confirm_email_task_succeeded where confirm_email_task_id = $1)`, id)
		// The signal woke the process: it ended long before its wait's hour was up.
		require.True(t, scalar[bool](t, pool, `select s.created_at < t.created_at + interval '50 minutes'
			from crm.confirm_email_task_succeeded s join crm.confirm_email_task t using (confirm_email_task_id)
			where s.confirm_email_task_id = $1`, id))
		require.Equal(t, int64(1), scalar[int64](t, pool, terminal, id))
	})
	t.Run("timed out", func(t *testing.T) {
		t.Parallel()
		p := scaffold.Process{Name: "confirm_email", Schema: "crm", Key: "signup_id", Channel: taskorch.TypeEmail,
			WaitSignal: "email.confirmed", WaitTimeout: "1 second"}
		pool := apply(t, p)
		run(t, pool, accept)
		id := scalar[int64](t, pool, `select confirm_email_task_id from crm.kickoff_confirm_email(8)`)
		waitTrue(t, pool, "the wait times out", `select exists (select 1 from crm.confirm_email_task_timed_out where confirm_email_task_id = $1)`, id)
		require.Equal(t, "no email.confirmed signal within 00:00:01",
			scalar[string](t, pool, `select reason from crm.confirm_email_task_timed_out where confirm_email_task_id = $1`, id))
		require.Equal(t, int64(1), scalar[int64](t, pool, terminal, id), "timed_out is its one terminal fact, not a failure")
		require.False(t, scalar[bool](t, pool, `select crm.is_confirm_email_stuck($1)`, id))
		require.Equal(t, "timed_out no email.confirmed signal within 00:00:01", scalar[string](t, pool, `
			select state || ' ' || error from queues.process_instances(_process => 'crm.confirm_email') where instance_id = $1`, id))
		require.Equal(t, []int64{0, 1}, scalar[[]int64](t, pool, `select array[failed, timed_out]
			from queues.process_instance_counts() where process = 'crm.confirm_email'`))
		require.Equal(t, "<nil> 1", scalar[string](t, pool, `select coalesce(failed::text, '<nil>') || ' ' || timed_out
			from queues.process_instance_counts(10, '{timed_out}') where process = 'crm.confirm_email'`), "only the states asked for are counted")
		// A timed-out instance is not retried by hand: only a failure is.
		_, err := pool.Exec(context.Background(), `select queues.retry_process('crm.confirm_email', $1, 'resend')`, id)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "55000", pgErr.Code)
		require.Contains(t, pgErr.Message, "timed out (an outcome, not a failure); only a failed instance can be retried")
		// A signal after the deadline changes nothing.
		require.True(t, scalar[bool](t, pool, `select queues.signal('email.confirmed', '8', '{}')`))
		require.Equal(t, int64(1), scalar[int64](t, pool, terminal, id))
	})
}

// A scaffolded process's facts helpers count the current run only: run 1 fails both its
// attempts and is stuck; retried by hand, run 2's attempt succeeds and the process waits for its
// signal, run 1's failures notwithstanding.
func TestGeneratedFactsHelpersCountTheCurrentRun(t *testing.T) {
	t.Parallel()
	p := scaffold.Process{Name: "confirm_email", Schema: "crm", Key: "signup_id", Channel: taskorch.TypeEmail,
		MaxAttempts: 2, WaitSignal: "email.confirmed", WaitTimeout: "1 second"}
	pool := apply(t, p)
	var calls atomic.Int32
	run(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: taskorch.ChannelProviderFunc(
		func(context.Context, taskorch.ChannelCall) (json.RawMessage, error) {
			if calls.Add(1) <= 2 {
				return nil, errors.New("provider down")
			}
			return json.RawMessage(`{"id":"m-1"}`), nil
		})})

	id := scalar[int64](t, pool, `select confirm_email_task_id from crm.kickoff_confirm_email(9)`)
	waitTrue(t, pool, "run 1 failed", `select exists (select 1 from crm.confirm_email_task_failed where confirm_email_task_id = $1)`, id)
	require.Equal(t, 2, scalar[int](t, pool, `select crm.count_confirm_email_failed_attempts($1)`, id))
	require.True(t, scalar[bool](t, pool, `select crm.is_confirm_email_stuck($1)`, id))
	_, err := pool.Exec(context.Background(), `update crm.process_config set wait_timeout = '1 hour'`)
	require.NoError(t, err)
	require.Equal(t, 2, scalar[int](t, pool, `select run from queues.retry_process('crm.confirm_email', $1, 'resend')`, id))
	waitTrue(t, pool, "run 2's attempt succeeded", `select crm.has_confirm_email_succeeded_attempt($1)`, id)
	require.Zero(t, scalar[int](t, pool, `select crm.count_confirm_email_failed_attempts($1)`, id))
	require.Equal(t, 1, scalar[int](t, pool, `select crm.count_confirm_email_attempts($1)`, id))
	require.False(t, scalar[bool](t, pool, `select crm.is_confirm_email_stuck($1)`, id))
	require.Equal(t, "waiting", scalar[string](t, pool, `select state from crm.confirm_email_instances where instance_id = $1`, id))
}

// A wait step's signal that arrives before the attempt skips it: the process ends succeeded with
// no attempt and nothing sent (an invoice paid before its reminder).
func TestGeneratedWaitStepSignalFirstSkipsAttempt(t *testing.T) {
	t.Parallel()
	p := scaffold.Process{Name: "remind_unpaid", Schema: "billing", Key: "invoice_id", Channel: taskorch.TypeEmail,
		WaitSignal: "invoice.paid", WaitTimeout: "1 hour"}
	pool := apply(t, p)
	var calls atomic.Int32
	run(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: taskorch.ChannelProviderFunc(
		func(context.Context, taskorch.ChannelCall) (json.RawMessage, error) {
			calls.Add(1)
			return json.RawMessage(`{"id":"m-1"}`), nil
		})})

	require.True(t, scalar[bool](t, pool, `select queues.signal('invoice.paid', '31', '{}')`))
	paid := scalar[int64](t, pool, `select remind_unpaid_task_id from billing.kickoff_remind_unpaid(31)`)
	unpaid := scalar[int64](t, pool, `select remind_unpaid_task_id from billing.kickoff_remind_unpaid(32)`)
	waitTrue(t, pool, "the paid invoice's process ends", `select exists (select 1 from billing.remind_unpaid_task_succeeded where remind_unpaid_task_id = $1)`, paid)
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from billing.remind_unpaid_attempt where remind_unpaid_task_id = $1`, paid), "no attempt")
	waitTrue(t, pool, "the unpaid invoice's reminder is sent", `select billing.has_remind_unpaid_succeeded_attempt($1)`, unpaid)
	require.EqualValues(t, 1, calls.Load(), "one reminder: the unpaid invoice's")
	require.Equal(t, "succeeded 0", scalar[string](t, pool, `
		select state || ' ' || attempts from queues.process_instances(_process => 'billing.remind_unpaid') where instance_id = $1`, paid))
}
