-- Resumes a task type and wakes the workers. True when it was paused.
create or replace function queues.resume_queue(_task_type text) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    delete from queues.queue_pause where task_type = _task_type;
    if found then
        perform pg_notify('taskorch_task', _task_type);
        return true;
    end if;
    return false;
end $$;
revoke all on function queues.resume_queue(text) from public;
