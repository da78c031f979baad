-- Adds or updates a periodic schedule as its caller (SECURITY INVOKER): asks for a permit for the
-- functions its task names, then queues.put_schedule writes it (docs/security.md, "Who may name a
-- function").
create or replace function queues.add_schedule(
    _name text,
    _cron text,
    _task_type text,
    _payload jsonb default '{}',
    _priority integer default 0,
    _max_attempts integer default null,
    _enabled boolean default true,
    _next_run_at timestamptz default null)
returns boolean
language plpgsql security invoker set search_path = pg_catalog, pg_temp as $$
begin
    if _task_type in ('db_function', 'email', 'sms', 'file_delete') then
        perform queues.permit_task_functions(array[_task_type], array[coalesce(_payload, '{}'::jsonb)]);
    end if;
    return queues.put_schedule(_name, _cron, _task_type, _payload, _priority, _max_attempts, _enabled, _next_run_at);
end $$;
revoke all on function queues.add_schedule(text, text, text, jsonb, integer, integer, boolean, timestamp with time zone) from public;
