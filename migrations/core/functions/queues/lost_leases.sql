-- Of the given leases, those no longer their task's current one (cancelled, taken over, finished),
-- with the task's status: the worker stops their runs.
create or replace function queues.lost_leases(_task_ids bigint[], _lease_ids bigint[])
returns table (task_id bigint, lease_id bigint, status queues.task_status)
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _task_ids is null or _lease_ids is null or cardinality(_task_ids) <> cardinality(_lease_ids) then
        raise exception 'lost_leases: _task_ids and _lease_ids must be arrays of the same length, got % and %',
            coalesce(cardinality(_task_ids)::text, 'NULL'), coalesce(cardinality(_lease_ids)::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    return query
    select c.task_id, c.lease_id, t.status
    from unnest(_task_ids, _lease_ids) as c(task_id, lease_id)
    left join queues.task t on t.task_id = c.task_id
    where t.task_id is null
       or t.lease_id is distinct from c.lease_id
       or t.status <> 'running'
       or t.lease_expires_at is null;  -- renew_leases would not extend it
end $$;
revoke all on function queues.lost_leases(bigint[], bigint[]) from public;
grant execute on function queues.lost_leases(bigint[], bigint[]) to worker_service_user;
