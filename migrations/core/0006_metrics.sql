-- What the leader samples for the queue metrics (taskorch_queue_depth,
-- taskorch_oldest_pending_age_seconds): one row per task type and live status. SECURITY DEFINER
-- with a fixed search_path, like the rest of the worker's API: the worker role has no table
-- privileges.
--
-- Cost: only pending and running tasks are counted, so the work follows the backlog, not the
-- history (millions of completed tasks cost nothing here). The leader alone calls it, every
-- few seconds (WorkerConfig.QueueStatsInterval).
--
-- oldest_pending_age_seconds is how long the longest-waiting due task has waited, on the
-- database's clock: now() minus the smallest run_at among pending tasks that are due. Tasks
-- scheduled for later do not count; 0 when nothing pending is due.
create function queues.queue_stats()
returns table (task_type text, status text, tasks bigint, oldest_pending_age_seconds double precision)
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select t.task_type,
           t.status::text,
           count(*),
           coalesce(extract(epoch from now() - min(t.run_at) filter (where t.status = 'pending' and t.run_at <= now())), 0)::double precision
    from queues.task t
    where t.status in ('pending', 'running')
    group by t.task_type, t.status
$$;

revoke all on function queues.queue_stats() from public;
grant execute on function queues.queue_stats() to worker_service_user;
