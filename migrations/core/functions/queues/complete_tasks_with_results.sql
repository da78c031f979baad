-- Completes tasks under their leases, each with its result (or none): the completion body
-- (queues.complete_tasks_and_take) taking no children. Returns each task with what became of
-- it; a stale lease's completion is refused and recorded in queues.error.
create or replace function queues.complete_tasks_with_results(_task_ids bigint[], _lease_ids bigint[], _results jsonb[])
returns table (task_id bigint, status text)
language sql security definer set search_path = pg_catalog, pg_temp as $$
    select c.task_id, c.status from queues.complete_tasks_and_take(_task_ids, _lease_ids, _results, null, null, 0, null) c
$$;
revoke all on function queues.complete_tasks_with_results(bigint[], bigint[], jsonb[]) from public;
grant execute on function queues.complete_tasks_with_results(bigint[], bigint[], jsonb[]) to worker_service_user;
