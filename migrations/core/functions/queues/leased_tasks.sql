-- The tasks of _task_ids that run under a lease of _worker_id: what a worker reads of the
-- children its completion leased to it (queues.complete_tasks_and_take), in claim order, as a
-- claim returns them.
create or replace function queues.leased_tasks(_worker_id text, _task_ids bigint[])
returns setof queues.task
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    -- Each task by its key: a filter of = any (_task_ids) was planned as a scan of every running
    -- task.
    select t.*
    from unnest(_task_ids) as i(task_id)
    join queues.task t on t.task_id = i.task_id
    where t.status = 'running' and t.worker_id = _worker_id
    order by t.priority desc, t.run_at, t.task_id
$$;
revoke all on function queues.leased_tasks(text, bigint[]) from public;
grant execute on function queues.leased_tasks(text, bigint[]) to worker_service_user;
