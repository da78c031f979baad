-- Completes a task under a lease (the worker's form). True when the task is completed under
-- that lease (now or before); false when refused because the lease is stale (recorded in
-- queues.error). Raises P0002 for an unknown task.
create or replace function queues.complete_task(_task_id bigint, _lease_id bigint) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if not exists (select from queues.task where task_id = _task_id) then
        raise exception 'task % does not exist', _task_id using errcode = 'no_data_found';
    end if;
    return exists (select from queues.complete_tasks(array[_task_id], array[_lease_id]));
end $$;
revoke all on function queues.complete_task(bigint, bigint) from public;
grant execute on function queues.complete_task(bigint, bigint) to worker_service_user;

-- Seed 002's form: completes a task under its current lease.
create or replace function queues.complete_task(_task_id bigint) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _lease bigint;
begin
    select lease_id into _lease from queues.task where task_id = _task_id;
    if not found then
        raise exception 'task % does not exist', _task_id using errcode = 'no_data_found';
    end if;
    return queues.complete_task(_task_id, _lease);
end $$;
revoke all on function queues.complete_task(bigint) from public;
grant execute on function queues.complete_task(bigint) to worker_service_user;
