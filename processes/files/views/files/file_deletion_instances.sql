-- The instances of files.file_deletion (docs/processes.md, "Seeing processes"): one branch per
-- state, so a filter on state reads only that state's rows; files.file_deletion_wait_until tells
-- waiting from running. Run-aware: a failed fact of a run that was restarted is not terminal (the
-- instance is running or waiting again); attempts count every run's, numbered on. No parent: with
-- the accounts set, the registry reads files.file_deletion_account_instances instead, which names
-- the account deletion that started a file deletion.
create or replace view files.file_deletion_instances as
select t.file_deletion_task_id as instance_id, 'succeeded'::text as state, null::timestamptz as wait_until,
       (select count(*)::integer from files.file_deletion_attempt a where a.file_deletion_task_id = t.file_deletion_task_id) as attempts,
       t.created_at as started_at, s.created_at as ended_at, null::text as error,
       null::text as parent_process, null::bigint as parent_id
from files.file_deletion_task_succeeded s
join files.file_deletion_task t on t.file_deletion_task_id = s.file_deletion_task_id
union all
select t.file_deletion_task_id, 'failed', null,
       (select count(*)::integer from files.file_deletion_attempt a where a.file_deletion_task_id = t.file_deletion_task_id),
       t.created_at, f.created_at, f.error_message, null::text, null::bigint
from files.file_deletion_task_failed f
join files.file_deletion_task t on t.file_deletion_task_id = f.file_deletion_task_id
where not exists (select 1 from files.file_deletion_task_restarted z where z.file_deletion_task_id = f.file_deletion_task_id and z.run > f.run)
union all
select t.file_deletion_task_id, 'waiting', w.wait_until,
       (select count(*)::integer from files.file_deletion_attempt a where a.file_deletion_task_id = t.file_deletion_task_id),
       t.created_at, null, null, null::text, null::bigint
from files.file_deletion_task t
cross join lateral (select files.file_deletion_wait_until(t.file_deletion_task_id) as wait_until
                    where not exists (select 1 from files.file_deletion_task_succeeded s where s.file_deletion_task_id = t.file_deletion_task_id)
                      and not exists (select 1 from files.file_deletion_task_failed f where f.file_deletion_task_id = t.file_deletion_task_id
                                        and not exists (select 1 from files.file_deletion_task_restarted z
                                                        where z.file_deletion_task_id = f.file_deletion_task_id and z.run > f.run))
                    offset 0) w
where w.wait_until is not null
union all
select t.file_deletion_task_id, 'running', null,
       (select count(*)::integer from files.file_deletion_attempt a where a.file_deletion_task_id = t.file_deletion_task_id),
       t.created_at, null, null, null::text, null::bigint
from files.file_deletion_task t
cross join lateral (select files.file_deletion_wait_until(t.file_deletion_task_id) as wait_until
                    where not exists (select 1 from files.file_deletion_task_succeeded s where s.file_deletion_task_id = t.file_deletion_task_id)
                      and not exists (select 1 from files.file_deletion_task_failed f where f.file_deletion_task_id = t.file_deletion_task_id
                                        and not exists (select 1 from files.file_deletion_task_restarted z
                                                        where z.file_deletion_task_id = f.file_deletion_task_id and z.run > f.run))
                    offset 0) w
where w.wait_until is null;
revoke all on files.file_deletion_instances from public;
