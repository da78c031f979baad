-- Which task types no live worker claims (docs/operations.md, "Task types no worker claims").
--
-- A worker claims only the task types it can run: db_function, its Go handlers' types and the
-- channels it has a provider for (WorkerConfig.ClaimUnknownTypes turns that off). It records
-- them in queues.worker.task_types when it registers (queues.register_worker's _task_types); a
-- worker that claims every type records NULL. A type whose due tasks no registered worker
-- claims waits until one that does starts: queue_stats now says so, for the leader's gauge
-- taskorch_queue_unserved, and `taskorch queues list` and the dashboard read the same column.
--
-- queue_stats keeps its columns and adds two: due, the pending tasks whose run_at has come, and
-- workers, how many registered workers claim the type (NULL task_types counts for every type).
-- A registered worker is a live one: the leader deletes the row of a worker whose heartbeat is
-- older than the worker timeout. The extra columns cost no extra scan: workers is counted per
-- group, over the small workers table. Its result type changes, so it is dropped and created
-- again, with its grant; callers name the columns they read.

comment on column queues.worker.task_types is
    'The task types this worker claims (db_function, its Go handlers, the channels it has a provider for); NULL: every type.';

drop function queues.queue_stats();

create function queues.queue_stats()
returns table (task_type text, status text, tasks bigint, oldest_pending_age_seconds double precision,
               due bigint, workers bigint)
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select g.task_type, g.status, g.tasks, g.oldest_pending_age_seconds, g.due,
           (select count(*) from queues.worker w
            where w.task_types is null or g.task_type = any (w.task_types))
    from (
        select t.task_type,
               t.status::text as status,
               count(*) as tasks,
               coalesce(extract(epoch from now() - min(t.run_at) filter (where t.status = 'pending' and t.run_at <= now())), 0)::double precision
                   as oldest_pending_age_seconds,
               count(*) filter (where t.status = 'pending' and t.run_at <= now()) as due
        from queues.task t
        where t.status in ('pending', 'running')
        group by t.task_type, t.status
    ) g
$$;

comment on function queues.queue_stats() is
    'Pending and running tasks by type and status: how many, how long the oldest due one has waited, how many are due, and how many registered workers claim the type (0: none serves it).';

revoke all on function queues.queue_stats() from public;
grant execute on function queues.queue_stats() to worker_service_user;
