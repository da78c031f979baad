-- Waiting, pending and running tasks by queue and status (see the comment below). Its cost
-- follows the backlog, not the history: it reads the three statuses' partial indexes. A queue is a
-- task type, or one SQL function's db_function tasks, named db_function:<schema.function> (the
-- name queues.pause_queue and queues.set_limit take; docs/operations.md, "Metrics and alerts"):
-- its function is the task's key_scope (every db_function task in flight has it, core/0103),
-- else its payload's, and a db_function task naming none stays under db_function. The functions
-- are few (the SQL code a database defines), so the queues stay a bounded set of labels.
-- workers counts the registered workers that claim the task type (db_function for a function's
-- queue: such a worker serves every function).
create or replace function queues.queue_stats()
returns table (task_type text, status text, tasks bigint, oldest_pending_age_seconds double precision,
               due bigint, workers bigint)
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select g.queue, g.status, g.tasks, g.oldest_pending_age_seconds, g.due,
           (select count(*) from queues.worker w
            where w.task_types is null or g.task_type = any (w.task_types))
    from (
        select t.task_type,
               case when t.task_type = 'db_function'
                    then coalesce('db_function:' || coalesce(nullif(t.key_scope, ''), t.payload ->> 'db_function'), t.task_type)
                    else t.task_type end as queue,
               t.status::text as status,
               count(*) as tasks,
               coalesce(extract(epoch from now() - min(t.run_at) filter (where t.status = 'pending' and t.run_at <= now())), 0)::double precision
                   as oldest_pending_age_seconds,
               count(*) filter (where t.status = 'pending' and t.run_at <= now()) as due
        -- One branch per status, each naming it as a literal, so that each reads its partial
        -- index (an IN list would match none of them and scan the whole table, history and all).
        from (select task_type, key_scope, payload, status, run_at from queues.task where status = 'waiting'
              union all
              select task_type, key_scope, payload, status, run_at from queues.task where status = 'pending'
              union all
              select task_type, key_scope, payload, status, run_at from queues.task where status = 'running') t
        group by t.task_type, 2, t.status
    ) g
$$;
revoke all on function queues.queue_stats() from public;
grant execute on function queues.queue_stats() to worker_service_user;
comment on function queues.queue_stats() is 'Waiting, pending and running tasks by queue (a task type, or db_function:<schema.function> for one SQL function''s tasks) and status: how many, how long the oldest due one has waited, how many are due, and how many registered workers claim the type (0: none serves it).';
