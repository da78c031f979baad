-- Removes the limit of a task type: its tasks are claimed freely again. False when the type had
-- no limit.
create or replace function queues.remove_limit(_task_type text) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    delete from queues.task_limit where task_type = _task_type;
    if not found then
        return false;
    end if;
    perform internal.rekey_limited_tasks(_task_type);
    return true;
end $$;
revoke all on function queues.remove_limit(text) from public;
