-- The instances of accounts.account_deletion (docs/processes.md, "Seeing processes"): a failed
-- fact of a run that was restarted is not terminal (the instance is running or waiting again).
create or replace view accounts.account_deletion_instances as
select t.account_deletion_task_id as instance_id, 'succeeded'::text as state, null::timestamptz as wait_until,
       null::integer as attempts,
       t.created_at as started_at, s.created_at as ended_at, null::text as error,
       null::text as parent_process, null::bigint as parent_id
from accounts.account_deletion_task_succeeded s
join accounts.account_deletion_task t on t.account_deletion_task_id = s.account_deletion_task_id
union all
select t.account_deletion_task_id, 'failed', null,
       null::integer,
       t.created_at, f.created_at, f.error_message, null::text, null::bigint
from accounts.account_deletion_task_failed f
join accounts.account_deletion_task t on t.account_deletion_task_id = f.account_deletion_task_id
where not exists (select 1 from accounts.account_deletion_task_restarted z
                  where z.account_deletion_task_id = f.account_deletion_task_id and z.run > f.run)
union all
select t.account_deletion_task_id, 'waiting', w.wait_until,
       null::integer,
       t.created_at, null, null, null::text, null::bigint
from accounts.account_deletion_task t
cross join lateral (select accounts.account_deletion_wait_until(t.account_deletion_task_id) as wait_until
                    where not exists (select 1 from accounts.account_deletion_task_succeeded s where s.account_deletion_task_id = t.account_deletion_task_id)
                      and not exists (select 1 from accounts.account_deletion_task_failed f where f.account_deletion_task_id = t.account_deletion_task_id
                                        and not exists (select 1 from accounts.account_deletion_task_restarted z
                                                        where z.account_deletion_task_id = f.account_deletion_task_id and z.run > f.run))
                    offset 0) w
where w.wait_until is not null
union all
select t.account_deletion_task_id, 'running', null,
       null::integer,
       t.created_at, null, null, null::text, null::bigint
from accounts.account_deletion_task t
cross join lateral (select accounts.account_deletion_wait_until(t.account_deletion_task_id) as wait_until
                    where not exists (select 1 from accounts.account_deletion_task_succeeded s where s.account_deletion_task_id = t.account_deletion_task_id)
                      and not exists (select 1 from accounts.account_deletion_task_failed f where f.account_deletion_task_id = t.account_deletion_task_id
                                        and not exists (select 1 from accounts.account_deletion_task_restarted z
                                                        where z.account_deletion_task_id = f.account_deletion_task_id and z.run > f.run))
                    offset 0) w
where w.wait_until is null;
revoke all on accounts.account_deletion_instances from public;
