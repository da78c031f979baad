-- The instances view, run-aware: a failed fact of a run that was restarted is not terminal (the
-- instance is running or waiting again); attempts count every run's, numbered on.
create or replace view comms.send_sms_instances as
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
where not exists (select 1 from comms.send_sms_task_restarted z where z.send_sms_task_id = f.send_sms_task_id and z.run > f.run)
union all
select t.send_sms_task_id, 'waiting', w.wait_until,
       (select count(*)::integer from comms.send_sms_attempt a where a.send_sms_task_id = t.send_sms_task_id),
       t.created_at, null, null, null::text, null::bigint
from comms.send_sms_task t
cross join lateral (select comms.send_sms_wait_until(t.send_sms_task_id) as wait_until
                    where not exists (select 1 from comms.send_sms_task_succeeded s where s.send_sms_task_id = t.send_sms_task_id)
                      and not exists (select 1 from comms.send_sms_task_failed f where f.send_sms_task_id = t.send_sms_task_id
                                        and not exists (select 1 from comms.send_sms_task_restarted z
                                                        where z.send_sms_task_id = f.send_sms_task_id and z.run > f.run))
                    offset 0) w
where w.wait_until is not null
union all
select t.send_sms_task_id, 'running', null,
       (select count(*)::integer from comms.send_sms_attempt a where a.send_sms_task_id = t.send_sms_task_id),
       t.created_at, null, null, null::text, null::bigint
from comms.send_sms_task t
cross join lateral (select comms.send_sms_wait_until(t.send_sms_task_id) as wait_until
                    where not exists (select 1 from comms.send_sms_task_succeeded s where s.send_sms_task_id = t.send_sms_task_id)
                      and not exists (select 1 from comms.send_sms_task_failed f where f.send_sms_task_id = t.send_sms_task_id
                                        and not exists (select 1 from comms.send_sms_task_restarted z
                                                        where z.send_sms_task_id = f.send_sms_task_id and z.run > f.run))
                    offset 0) w
where w.wait_until is null;
revoke all on comms.send_sms_instances from public;
