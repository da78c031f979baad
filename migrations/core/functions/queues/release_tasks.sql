-- Gives tasks back to pending under their leases (a worker that stops), without counting the
-- attempt; returns the tasks released.
create or replace function queues.release_tasks(_task_ids bigint[], _lease_ids bigint[], _reason text default null)
returns setof bigint
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    return query
    with held as (
        select t.task_id
        from queues.task t
        join unnest(_task_ids, _lease_ids) as c(task_id, lease_id) on t.task_id = c.task_id and t.lease_id = c.lease_id
        where t.lease_expires_at is not null  -- i.e. running
        order by t.task_id
        for no key update of t
    ), rel as (
        update queues.task t
        set status = 'pending', run_at = clock_timestamp(), lease_expires_at = null, attempt = greatest(t.attempt - 1, 0)
        from held h
        where t.task_id = h.task_id
        returning t.task_id, t.lease_id, t.worker_id, t.attempt
    ), ev as (
        insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
        select r.task_id, 'released', 'running', 'pending', r.lease_id, r.worker_id, r.attempt + 1,
               coalesce(left(nullif(_reason, ''), 1024), 'released by its worker')
        from rel r
    )
    select r.task_id from rel r;
end $$;
revoke all on function queues.release_tasks(bigint[], bigint[], text) from public;
grant execute on function queues.release_tasks(bigint[], bigint[], text) to worker_service_user;
