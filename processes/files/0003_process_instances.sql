-- Seeing the file deletions (docs/processes.md, "Seeing processes"): an instances view,
-- registered in queues.process (core/0025). The accounts set redefines the view to link each
-- file deletion to the account deletion that started it (accounts/0002).

-- When a files.file_deletion instance waits until: NULL while an attempt is outstanding
-- (its task is queued or running) or a supervisor run is due or running; else the next
-- supervisor run, scheduled in the future (queues.process_next_run). The one place that decides
-- 'waiting'.
create function files.file_deletion_wait_until(_file_deletion_task_id bigint) returns timestamptz
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select case
        when exists (select 1 from files.file_deletion_attempt a
                     where a.file_deletion_task_id = _file_deletion_task_id
                       and not exists (select 1 from files.file_deletion_attempt_succeeded s where s.file_deletion_attempt_id = a.file_deletion_attempt_id)
                       and not exists (select 1 from files.file_deletion_attempt_failed f where f.file_deletion_attempt_id = a.file_deletion_attempt_id))
        then null
        else queues.process_next_run('files.file_deletion_supervisor', _file_deletion_task_id)
    end
$$;

-- The instances of files.file_deletion (docs/processes.md, "Seeing processes"): one branch
-- per state, so a filter on state reads only that state's rows; files.file_deletion_wait_until
-- tells waiting from running.
create view files.file_deletion_instances as
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
union all
select t.file_deletion_task_id, 'waiting', w.wait_until,
       (select count(*)::integer from files.file_deletion_attempt a where a.file_deletion_task_id = t.file_deletion_task_id),
       t.created_at, null, null, null::text, null::bigint
from files.file_deletion_task t
cross join lateral (select files.file_deletion_wait_until(t.file_deletion_task_id) as wait_until
                    where not exists (select 1 from files.file_deletion_task_succeeded s where s.file_deletion_task_id = t.file_deletion_task_id)
                      and not exists (select 1 from files.file_deletion_task_failed f where f.file_deletion_task_id = t.file_deletion_task_id)
                    offset 0) w
where w.wait_until is not null
union all
select t.file_deletion_task_id, 'running', null,
       (select count(*)::integer from files.file_deletion_attempt a where a.file_deletion_task_id = t.file_deletion_task_id),
       t.created_at, null, null, null::text, null::bigint
from files.file_deletion_task t
cross join lateral (select files.file_deletion_wait_until(t.file_deletion_task_id) as wait_until
                    where not exists (select 1 from files.file_deletion_task_succeeded s where s.file_deletion_task_id = t.file_deletion_task_id)
                      and not exists (select 1 from files.file_deletion_task_failed f where f.file_deletion_task_id = t.file_deletion_task_id)
                    offset 0) w
where w.wait_until is null;

select queues.register_process('files', 'file_deletion', 'File deletion',
    'One stored file deleted through the file_delete channel, with retries and backoff (files.kickoff_file_deletion).');

-- Grants: nothing for PUBLIC or the worker; the schema's owner reads them (queues.process_instances).
revoke all on files.file_deletion_instances from public;
revoke all on function files.file_deletion_wait_until(bigint) from public;
