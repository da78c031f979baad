-- Locks a running task under its lease for a db_function's or handler's transaction, FOR KEY SHARE
-- (docs/design.md, "Which statement locks what"): false when the lease is not the task's current
-- one. When it holds, the task's id is this transaction's taskorch.task_id
-- (queues.current_task_id()).
create or replace function queues.lock_lease(_task_id bigint, _lease_id bigint) returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    perform 1 from queues.task
    where task_id = _task_id and lease_id = _lease_id and lease_expires_at is not null  -- i.e. running
    for key share;
    if found then
        perform set_config('taskorch.task_id', _task_id::text, true);
        return true;
    end if;
    return false;
end $$;
revoke all on function queues.lock_lease(bigint, bigint) from public;
grant execute on function queues.lock_lease(bigint, bigint) to worker_service_user;
