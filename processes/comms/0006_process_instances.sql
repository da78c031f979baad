-- Seeing the comms processes (docs/processes.md, "Seeing processes"): an instances view per
-- process, registered in queues.process (core/0025), so queues.process_instances, the dashboard
-- and `taskorch processes list` show every email and SMS with its state.

-- When a comms.send_email instance waits until: NULL while an attempt is outstanding
-- (its task is queued or running) or a supervisor run is due or running; else the next
-- supervisor run, scheduled in the future (queues.process_next_run). The one place that decides
-- 'waiting'.
create function comms.send_email_wait_until(_send_email_task_id bigint) returns timestamptz
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select case
        when exists (select 1 from comms.send_email_attempt a
                     where a.send_email_task_id = _send_email_task_id
                       and not exists (select 1 from comms.send_email_attempt_succeeded s where s.send_email_attempt_id = a.send_email_attempt_id)
                       and not exists (select 1 from comms.send_email_attempt_failed f where f.send_email_attempt_id = a.send_email_attempt_id))
        then null
        else queues.process_next_run('comms.send_email_supervisor', _send_email_task_id)
    end
$$;

-- The instances of comms.send_email (docs/processes.md, "Seeing processes"): one branch
-- per state, so a filter on state reads only that state's rows; comms.send_email_wait_until
-- tells waiting from running.
create view comms.send_email_instances as
select t.send_email_task_id as instance_id, 'succeeded'::text as state, null::timestamptz as wait_until,
       (select count(*)::integer from comms.send_email_attempt a where a.send_email_task_id = t.send_email_task_id) as attempts,
       t.created_at as started_at, s.created_at as ended_at, null::text as error,
       null::text as parent_process, null::bigint as parent_id
from comms.send_email_task_succeeded s
join comms.send_email_task t on t.send_email_task_id = s.send_email_task_id
union all
select t.send_email_task_id, 'failed', null,
       (select count(*)::integer from comms.send_email_attempt a where a.send_email_task_id = t.send_email_task_id),
       t.created_at, f.created_at, f.error_message, null::text, null::bigint
from comms.send_email_task_failed f
join comms.send_email_task t on t.send_email_task_id = f.send_email_task_id
union all
select t.send_email_task_id, 'waiting', w.wait_until,
       (select count(*)::integer from comms.send_email_attempt a where a.send_email_task_id = t.send_email_task_id),
       t.created_at, null, null, null::text, null::bigint
from comms.send_email_task t
cross join lateral (select comms.send_email_wait_until(t.send_email_task_id) as wait_until
                    where not exists (select 1 from comms.send_email_task_succeeded s where s.send_email_task_id = t.send_email_task_id)
                      and not exists (select 1 from comms.send_email_task_failed f where f.send_email_task_id = t.send_email_task_id)
                    offset 0) w
where w.wait_until is not null
union all
select t.send_email_task_id, 'running', null,
       (select count(*)::integer from comms.send_email_attempt a where a.send_email_task_id = t.send_email_task_id),
       t.created_at, null, null, null::text, null::bigint
from comms.send_email_task t
cross join lateral (select comms.send_email_wait_until(t.send_email_task_id) as wait_until
                    where not exists (select 1 from comms.send_email_task_succeeded s where s.send_email_task_id = t.send_email_task_id)
                      and not exists (select 1 from comms.send_email_task_failed f where f.send_email_task_id = t.send_email_task_id)
                    offset 0) w
where w.wait_until is null;

-- When a comms.send_sms instance waits until: NULL while an attempt is outstanding
-- (its task is queued or running) or a supervisor run is due or running; else the next
-- supervisor run, scheduled in the future (queues.process_next_run). The one place that decides
-- 'waiting'.
create function comms.send_sms_wait_until(_send_sms_task_id bigint) returns timestamptz
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select case
        when exists (select 1 from comms.send_sms_attempt a
                     where a.send_sms_task_id = _send_sms_task_id
                       and not exists (select 1 from comms.send_sms_attempt_succeeded s where s.send_sms_attempt_id = a.send_sms_attempt_id)
                       and not exists (select 1 from comms.send_sms_attempt_failed f where f.send_sms_attempt_id = a.send_sms_attempt_id))
        then null
        else queues.process_next_run('comms.send_sms_supervisor', _send_sms_task_id)
    end
$$;

-- The instances of comms.send_sms (docs/processes.md, "Seeing processes"): one branch
-- per state, so a filter on state reads only that state's rows; comms.send_sms_wait_until
-- tells waiting from running.
create view comms.send_sms_instances as
select t.send_sms_task_id as instance_id, 'succeeded'::text as state, null::timestamptz as wait_until,
       (select count(*)::integer from comms.send_sms_attempt a where a.send_sms_task_id = t.send_sms_task_id) as attempts,
       t.created_at as started_at, s.created_at as ended_at, null::text as error,
       null::text as parent_process, null::bigint as parent_id
from comms.send_sms_task_succeeded s
join comms.send_sms_task t on t.send_sms_task_id = s.send_sms_task_id
union all
select t.send_sms_task_id, 'failed', null,
       (select count(*)::integer from comms.send_sms_attempt a where a.send_sms_task_id = t.send_sms_task_id),
       t.created_at, f.created_at, f.error_message, null::text, null::bigint
from comms.send_sms_task_failed f
join comms.send_sms_task t on t.send_sms_task_id = f.send_sms_task_id
union all
select t.send_sms_task_id, 'waiting', w.wait_until,
       (select count(*)::integer from comms.send_sms_attempt a where a.send_sms_task_id = t.send_sms_task_id),
       t.created_at, null, null, null::text, null::bigint
from comms.send_sms_task t
cross join lateral (select comms.send_sms_wait_until(t.send_sms_task_id) as wait_until
                    where not exists (select 1 from comms.send_sms_task_succeeded s where s.send_sms_task_id = t.send_sms_task_id)
                      and not exists (select 1 from comms.send_sms_task_failed f where f.send_sms_task_id = t.send_sms_task_id)
                    offset 0) w
where w.wait_until is not null
union all
select t.send_sms_task_id, 'running', null,
       (select count(*)::integer from comms.send_sms_attempt a where a.send_sms_task_id = t.send_sms_task_id),
       t.created_at, null, null, null::text, null::bigint
from comms.send_sms_task t
cross join lateral (select comms.send_sms_wait_until(t.send_sms_task_id) as wait_until
                    where not exists (select 1 from comms.send_sms_task_succeeded s where s.send_sms_task_id = t.send_sms_task_id)
                      and not exists (select 1 from comms.send_sms_task_failed f where f.send_sms_task_id = t.send_sms_task_id)
                    offset 0) w
where w.wait_until is null;

select queues.register_process('comms', 'send_email', 'Send email',
    'One email message sent through the email channel, with retries and backoff (comms.send_email).');
select queues.register_process('comms', 'send_sms', 'Send SMS',
    'One SMS sent through the sms channel, with retries and backoff (comms.send_sms).');

-- Grants: nothing for PUBLIC or the worker; the schema's owner reads them (queues.process_instances).
revoke all on comms.send_email_instances, comms.send_sms_instances from public;
revoke all on function comms.send_email_wait_until(bigint), comms.send_sms_wait_until(bigint) from public;
