package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// demoSchedule marks a database the demo has been seeded in.
const demoSchedule = "demo-heartbeat"

// seedDemo starts the demo's work, once per database: it reports false when the demo was seeded
// before (its schedule exists).
func seedDemo(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	seeded := false
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `select exists (select 1 from queues.schedule where name = $1)`, demoSchedule).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return nil
		}
		for _, sql := range []string{
			// The outbox's rules: one recipient fails once (then the retry gets through), one always.
			`insert into queues.outbox_rule (channel, recipient, fail, error_message) values
				('email', 'flaky@example.com', 'once', '451 mailbox busy, try again later (demo rule)'),
				('email', 'bounce@example.com', 'always', '550 no such user (demo rule)'),
				('sms', '+15550000002', 'once', '503 carrier unavailable (demo rule)')
			 on conflict do nothing`,
			`select comms.send_email('ann@example.com', 'Welcome to taskorch', 'Hello Ann, your account is ready.', '<p>Hello Ann, your account is <b>ready</b>.</p>')`,
			`select comms.send_email('flaky@example.com', 'Your invoice', 'Invoice 2026-11 is attached.')`,
			`select comms.send_email('bounce@example.com', 'Password reset', 'Follow this link to reset your password.')`,
			`select comms.send_email('bob@example.com', 'Reminder', 'Your trial ends tomorrow.', null, now() + interval '30 seconds')`,
			`select comms.send_sms('+15550000001', 'Your code is 424242')`,
			`select comms.send_sms('+15550000002', 'Your parcel arrives today')`,
			// A file deletion, and an account with two files to delete and then anonymize.
			`do $$
			declare
				_file bigint;
				_account bigint;
			begin
				insert into files.file (bucket, object_key, metadata) values ('demo-uploads', 'reports/2026-q3.pdf', '{"size": 48213}')
				returning file_id into _file;
				perform files.kickoff_file_deletion(_file);
				insert into accounts.account (email, display_name) values ('carol@example.com', 'Carol') returning account_id into _account;
				insert into files.file (bucket, object_key, owner_account_id)
				select 'demo-uploads', format('accounts/%s/%s', _account, n), _account from unnest(array['avatar.png', 'recording-1.wav']) n;
				perform api.request_account_deletion(_account);
			end $$`,
			// Go-handler tasks: a few that succeed, one that sleeps, one that fails until dead.
			`select queues.enqueue('demo.hello', jsonb_build_object('step', 'step ' || i), now(), i) from generate_series(1, 5) i`,
			`select queues.enqueue('taskorch.sleep', '{"ms": 1500}')`,
			`select queues.enqueue('taskorch.fail', '{"message": "demo: the report service answered 500"}', now(), 0, null, 2)`,
			`select queues.add_schedule('` + demoSchedule + `', '* * * * *', 'taskorch.noop', '{"demo": "heartbeat"}')`,
		} {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return err
			}
		}
		seeded = true
		return nil
	})
	return seeded, err
}

// fastDevProcesses makes the demo's processes retry within seconds (the private database only).
func fastDevProcesses(ctx context.Context, pool *pgxpool.Pool) error {
	for _, table := range []string{"comms.process_config", "files.process_config", "accounts.process_config"} {
		if _, err := pool.Exec(ctx, `update `+table+` set backoff_base = '2 seconds', backoff_max = '10 seconds',
			check_interval = '2 seconds'`); err != nil {
			return err
		}
	}
	return nil
}

// demoPending counts the demo's processes that have not reached a terminal fact in their current
// run (the scheduled email aside; a failed process retried by hand runs again) and its Go tasks
// still to run.
const demoPending = `select
	(select count(*) from comms.send_email_task t where t.scheduled_at <= now()
	   and not exists (select 1 from comms.send_email_task_succeeded s where s.send_email_task_id = t.send_email_task_id)
	   and not exists (select 1 from comms.send_email_task_failed f where f.send_email_task_id = t.send_email_task_id
	                     and f.run = comms.send_email_run(t.send_email_task_id)))
  + (select count(*) from comms.send_sms_task t
	   where not exists (select 1 from comms.send_sms_task_succeeded s where s.send_sms_task_id = t.send_sms_task_id)
	   and not exists (select 1 from comms.send_sms_task_failed f where f.send_sms_task_id = t.send_sms_task_id
	                     and f.run = comms.send_sms_run(t.send_sms_task_id)))
  + (select count(*) from files.file_deletion_task t
	   where not exists (select 1 from files.file_deletion_task_succeeded s where s.file_deletion_task_id = t.file_deletion_task_id)
	   and not exists (select 1 from files.file_deletion_task_failed f where f.file_deletion_task_id = t.file_deletion_task_id
	                     and f.run = files.file_deletion_run(t.file_deletion_task_id)))
  + (select count(*) from accounts.account_deletion_task t
	   where not exists (select 1 from accounts.account_deletion_task_succeeded s where s.account_deletion_task_id = t.account_deletion_task_id)
	   and not exists (select 1 from accounts.account_deletion_task_failed f where f.account_deletion_task_id = t.account_deletion_task_id
	                     and f.run = accounts.account_deletion_run(t.account_deletion_task_id)))
  + (select count(*) from queues.task where task_type in ('demo.hello', 'taskorch.sleep', 'taskorch.fail') and status in ('pending', 'running'))`

// waitDemo waits until demoPending is zero.
func waitDemo(ctx context.Context, pool *pgxpool.Pool, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		var n int64
		if err := pool.QueryRow(ctx, demoPending).Scan(&n); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: %d processes or tasks still running after %s", n, limit)
		case <-tick.C:
		}
	}
}

// printDemo prints each demo process with its attempts and outcome.
func printDemo(ctx context.Context, out io.Writer, pool *pgxpool.Pool) error {
	rows, err := pool.Query(ctx, `
		select 'send_email' as process, t.send_email_task_id as id, m.to_address as subject,
		       comms.count_send_email_attempts(t.send_email_task_id) as attempts,
		       comms.count_send_email_failed_attempts(t.send_email_task_id) as failed,
		       case when s.send_email_task_id is not null then 'succeeded'
		            when f.send_email_task_id is not null then 'failed: ' || f.error_message
		            else 'scheduled for ' || to_char(t.scheduled_at at time zone 'UTC', 'HH24:MI:SS') || ' UTC' end as outcome
		from comms.send_email_task t join comms.email_message m using (message_id)
		left join comms.send_email_task_succeeded s using (send_email_task_id)
		left join comms.send_email_task_failed f on f.send_email_task_id = t.send_email_task_id and f.run = comms.send_email_run(t.send_email_task_id)
		union all
		select 'send_sms', t.send_sms_task_id, m.to_number, comms.count_send_sms_attempts(t.send_sms_task_id),
		       comms.count_send_sms_failed_attempts(t.send_sms_task_id),
		       case when s.send_sms_task_id is not null then 'succeeded' else coalesce('failed: ' || f.error_message, 'running') end
		from comms.send_sms_task t join comms.sms_message m using (message_id)
		left join comms.send_sms_task_succeeded s using (send_sms_task_id)
		left join comms.send_sms_task_failed f on f.send_sms_task_id = t.send_sms_task_id and f.run = comms.send_sms_run(t.send_sms_task_id)
		union all
		select 'file_deletion', t.file_deletion_task_id, fi.bucket || '/' || fi.object_key, files.count_file_deletion_attempts(t.file_deletion_task_id),
		       files.count_file_deletion_failed_attempts(t.file_deletion_task_id),
		       case when s.file_deletion_task_id is not null then 'succeeded' else coalesce('failed: ' || f.error_message, 'running') end
		from files.file_deletion_task t join files.file fi using (file_id)
		left join files.file_deletion_task_succeeded s using (file_deletion_task_id)
		left join files.file_deletion_task_failed f on f.file_deletion_task_id = t.file_deletion_task_id and f.run = files.file_deletion_run(t.file_deletion_task_id)
		union all
		select 'account_deletion', t.account_deletion_task_id, 'account ' || t.account_id, null, null,
		       case when s.account_deletion_task_id is not null then 'succeeded' else coalesce('failed: ' || f.error_message, 'running') end
		from accounts.account_deletion_task t
		left join accounts.account_deletion_task_succeeded s using (account_deletion_task_id)
		left join accounts.account_deletion_task_failed f on f.account_deletion_task_id = t.account_deletion_task_id and f.run = accounts.account_deletion_run(t.account_deletion_task_id)
		order by 1, 2`)
	if err != nil {
		return err
	}
	defer rows.Close()
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(out, "\nThe demo's processes:")
	fmt.Fprintln(tw, "  PROCESS\tID\tFOR\tATTEMPTS\tFAILED\tOUTCOME")
	for rows.Next() {
		var process, subject, outcome string
		var id int64
		var attempts, failed *int32
		if err := rows.Scan(&process, &id, &subject, &attempts, &failed, &outcome); err != nil {
			return err
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%s\n", process, id, subject, intOrDash(attempts), intOrDash(failed), outcome)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var sent, refused int64
	if err := pool.QueryRow(ctx, `select count(*) filter (where status = 'sent'), count(*) filter (where status = 'failed')
		from queues.outbox_message`).Scan(&sent, &refused); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nThe outbox recorded %d deliveries and %d refusals (queues.outbox_message).\n", sent, refused)
	return nil
}

func intOrDash(v *int32) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}
