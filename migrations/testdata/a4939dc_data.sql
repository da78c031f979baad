-- A populated database of the last landed version (a4939dc: core 0001-0034, comms 0001-0009,
-- files 0001-0006, accounts 0001-0004), written through that version's SQL API as its workers
-- and applications did: TestUpgradeFromLastLandedVersion upgrades it. :app is replaced by the
-- name of a role of the test's own (an application that was granted the enqueue functions).

-- Settings an operator changed.
update queues.settings set retry_backoff_base = interval '2 seconds', notify_coalesce_ms = 5;

-- Workers: a live one that leads, one whose heartbeats stopped.
select queues.register_worker('w-live', 'host-a', 101, 4, 'v0.9.0', null, array['report', 'email', 'sms', 'file_delete', 'db_function']);
select queues.register_worker('w-gone', 'host-b', 102, 2, 'v0.9.0', null, null);
update queues.worker set last_heartbeat = now() - interval '1 hour' where worker_id = 'w-gone';
select queues.heartbeat_worker('w-live');
select queues.acquire_leadership('w-live', interval '1 minute');

-- An application role that may enqueue and add schedules.
grant usage on schema queues to :app;
grant execute on function queues.enqueue(text, jsonb, timestamptz, integer, text, integer),
    queues.enqueue_with_result(text, jsonb, timestamptz, integer, text, integer),
    queues.add_schedule(text, text, text, jsonb, integer, integer, boolean, timestamptz) to :app;

-- Tasks in every state, each with its leases, events and errors.
select queues.enqueue('report', '{"n": 1}');                                          -- 1 pending
select queues.enqueue('report', '{"n": 2}', now() + interval '1 day', 5, 'report-2');  -- 2 pending, later, keyed
select queues.enqueue('report', '{"n": 3}', now(), 0, null, 1);                       -- 3 dead
select queues.enqueue('report', '{"n": 4}');                                          -- 4 failed
select queues.enqueue('report', '{"n": 5}');                                          -- 5 retry scheduled
select queues.enqueue('report', '{"n": 6}');                                          -- 6 completed with a result
select queues.enqueue('report', '{"n": 7}');                                          -- 7 snoozed
select queues.enqueue('report', '{"n": 8}');                                          -- 8 cancelled while running
select queues.enqueue('report', '{"n": 9}');                                          -- 9 running
select queues.enqueue('report', '{"n": 10}');                                         -- 10 completed, its call failed
select queues.enqueue('report', '{"n": 11}');                                         -- 11 cancelled, pending
select queues.enqueue_debounced('digest', '{"user": 7}', 'digest-7', interval '1 minute');
select queues.enqueue('db_function', '{"db_function": "comms.send_email_supervisor"}', now() + interval '1 hour');
create temporary table claimed on commit drop as
    select task_id, lease_id from queues.claim_tasks('w-live', 8, interval '5 minutes', array['report']);
select queues.fail_task(3, 'out of paper', (select lease_id from claimed where task_id = 3), true, '{"code": 1}');
select queues.fail_task(4, 'bad input', (select lease_id from claimed where task_id = 4), false, null);
select queues.fail_task(5, 'try later', (select lease_id from claimed where task_id = 5), true, null);
select queues.complete_tasks_with_results(array[6], array[(select lease_id from claimed where task_id = 6)], array['{"pages": 3}'::jsonb]);
select queues.snooze_task(7, (select lease_id from claimed where task_id = 7), now() + interval '10 minutes');
select queues.cancel_task(8, 'operator stopped it');
select queues.record_error(9, (select lease_id from claimed where task_id = 9), 'slow printer', '{"at": "page 2"}');
select queues.complete_failed_call(10, (select lease_id from claimed where task_id = 10), 'the call failed', 'printer on fire');
select queues.cancel_task(11);
select queues.retry_task(3);
select queues.fail_task(3, 'out of paper again', (select lease_id from queues.claim_tasks_by_id('w-live', array[3::bigint])), true, null);

-- Schedules, limits, a paused type, a signal.
select queues.add_schedule('nightly-report', '0 3 * * *', 'report', '{"kind": "nightly"}', 1);
select queues.add_schedule('hourly-digest', '0 * * * *', 'digest', '{}', 0, 3, false);
select queues.set_limit('report', 2, 5.0, 10);
select queues.set_limit('email', null, 10.0, 20, 'to');
select queues.pause_queue('digest', 'operator');
select queues.signal('order.paid', '42', '{"amount": 5}');

-- The comms processes: three e-mails (sent and delivered; failed three times; at the provider)
-- and an SMS that failed once and was retried by hand.
update comms.process_config set max_attempts = 1 where process = 'send_sms';
select comms.send_email('ann@example.com', 'Hello', 'Hi Ann');
select comms.send_email('bob@example.com', 'Hello', 'Hi Bob');
select comms.send_email('cy@example.com', 'Hello', null, '<p>Hi Cy</p>');
select comms.send_sms('+15550100', 'Your code is 1234');
select comms.send_email_supervisor('{}');
select comms.send_sms_supervisor('{}');
create temporary table channel on commit drop as
    select t.task_id, t.lease_id, t.payload from queues.claim_tasks('w-live', 10, interval '5 minutes', array['email', 'sms']) t;
select comms.record_email_success(jsonb_build_object('original_payload', c.payload, 'worker_payload', '{"id": "re_1"}'::jsonb))
from channel c join comms.send_email_attempt a on a.task_id = c.task_id join comms.send_email_task r using (send_email_task_id)
join comms.email_message m on m.message_id = r.message_id where m.to_address = 'ann@example.com';
select comms.record_email_failure(jsonb_build_object('original_payload', c.payload, 'error', 'mailbox full'))
from channel c join comms.send_email_attempt a on a.task_id = c.task_id join comms.send_email_task r using (send_email_task_id)
join comms.email_message m on m.message_id = r.message_id where m.to_address = 'bob@example.com';
select comms.record_sms_failure(jsonb_build_object('original_payload', c.payload, 'error', 'carrier down'))
from channel c join comms.send_sms_attempt a on a.task_id = c.task_id;
select queues.complete_tasks(array_agg(c.task_id), array_agg(c.lease_id))
from channel c where c.payload ? 'send_sms_attempt_id'
   or c.task_id = (select a.task_id from comms.send_email_attempt a join comms.send_email_attempt_succeeded using (send_email_attempt_id));
select comms.record_email_delivery('re_1', 'email.delivered');
select comms.send_email_supervisor('{}');
select comms.send_sms_supervisor('{}');
select queues.retry_process('comms.send_sms', (select send_sms_task_id from comms.send_sms_task_failed), 'the carrier is back');

-- The file deletions and an account deletion, which starts one per file of the account.
insert into files.file (bucket, object_key) values ('uploads', 'a.txt'), ('uploads', 'b.txt');
select files.kickoff_file_deletion(file_id) from files.file where bucket = 'uploads';
insert into accounts.account (email, display_name) values ('dee@example.com', 'Dee');
insert into files.file (bucket, object_key, owner_account_id)
    select 'recordings', 'dee-' || i || '.wav', (select account_id from accounts.account) from generate_series(1, 2) i;
select api.request_account_deletion((select account_id from accounts.account));
select files.file_deletion_supervisor('{}');
select accounts.account_deletion_supervisor(jsonb_build_object('account_deletion_task_id', account_deletion_task_id))
from accounts.account_deletion_task;

-- The history partitions kept ahead, as the leader does.
select queues.maintain_history(queues.acquire_leadership('w-live', interval '1 minute'), interval '30 days');
