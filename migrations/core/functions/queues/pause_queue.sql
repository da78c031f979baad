-- Pauses a queue: a task type, or one SQL function's tasks ('db_function:<schema.function>', as a
-- limit names them; docs/sql.md, "Queue controls and the outbox"): its pending tasks are not claimed.
-- True when it was running and is now paused; false when already paused.
create or replace function queues.pause_queue(_task_type text, _paused_by text default null) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _n integer;
begin
    if _task_type is null or btrim(_task_type) = '' then
        raise exception 'pause_queue: _task_type is required' using errcode = 'invalid_parameter_value';
    end if;
    if _task_type like 'db_function:%' and _task_type !~ '^db_function:[a-z_][a-z0-9_$]*[.][a-z_][a-z0-9_$]*$' then
        raise exception 'pause_queue: % does not name a function: db_function:schema.name, two lowercase SQL identifiers', _task_type
            using errcode = 'invalid_parameter_value';
    end if;
    insert into queues.queue_pause (task_type, paused_by)
    values (_task_type, coalesce(_paused_by, session_user))
    on conflict (task_type) do nothing;
    get diagnostics _n = row_count;
    return _n = 1;
end $$;
revoke all on function queues.pause_queue(text, text) from public;
