-- Waiting, pending and running tasks by type and status (see the comment below).
create or replace function queues.queue_stats()
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
        where t.status in ('waiting', 'pending', 'running')
        group by t.task_type, t.status
    ) g
$$;
revoke all on function queues.queue_stats() from public;
grant execute on function queues.queue_stats() to worker_service_user;
comment on function queues.queue_stats() is 'Waiting, pending and running tasks by type and status: how many, how long the oldest due one has waited, how many are due, and how many registered workers claim the type (0: none serves it).';
