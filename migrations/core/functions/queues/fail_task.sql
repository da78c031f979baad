-- Seed 002's form: fails the attempt under the task's current lease.
create or replace function queues.fail_task(_task_id bigint, _error_message text) returns queues.task_status
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _lease bigint;
begin
    select lease_id into _lease from queues.task where task_id = _task_id;
    if not found then
        raise exception 'task % does not exist', _task_id using errcode = 'no_data_found';
    end if;
    return queues.fail_task(_task_id, _error_message, _lease);
end $$;
revoke all on function queues.fail_task(bigint, text) from public;
grant execute on function queues.fail_task(bigint, text) to worker_service_user;

-- Fails the attempt a lease holds (the worker's form): internal.fail_attempt with the task's own
-- retry policy. A non-retriable failure makes the task failed.
create or replace function queues.fail_task(
    _task_id bigint,
    _error_message text,
    _lease_id bigint,
    _retriable boolean default true,
    _context jsonb default null)
returns queues.task_status
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    select internal.fail_attempt('fail_task', _task_id, _error_message, _lease_id, _retriable, null, null, _context)
$$;
revoke all on function queues.fail_task(bigint, text, bigint, boolean, jsonb) from public;
grant execute on function queues.fail_task(bigint, text, bigint, boolean, jsonb) to worker_service_user;
