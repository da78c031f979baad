-- Writes a periodic schedule (SECURITY DEFINER; what add_schedule calls after its permit).
create or replace function queues.put_schedule(
    _name text,
    _cron text,
    _task_type text,
    _payload jsonb default '{}',
    _priority integer default 0,
    _max_attempts integer default null,
    _enabled boolean default true,
    _next_run_at timestamptz default null)
returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $_$
declare
    _created boolean;
begin
    if _name is null or _name !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$' or length(_name) > 128 then
        raise exception 'add_schedule: name % is malformed: use 1 to 128 letters, digits, "_", ".", ":" or "-", starting with a letter or digit',
            coalesce(quote_literal(left(_name, 140)), 'NULL') using errcode = 'invalid_parameter_value';
    end if;
    perform internal.check_task_input(_task_type, coalesce(_payload, '{}'::jsonb), _max_attempts, null, 'add_schedule');
    perform internal.check_finite('add_schedule', '_next_run_at', _next_run_at);
    -- The leader's parser, in SQL: a schedule it could not run is refused here.
    perform internal.check_cron('add_schedule', btrim(_cron));

    insert into queues.schedule as s (name, cron, task_type, payload, priority, max_attempts, enabled, next_run_at)
    values (_name, btrim(_cron), _task_type, coalesce(_payload, '{}'::jsonb), coalesce(_priority, 0), _max_attempts,
            coalesce(_enabled, true), _next_run_at)
    on conflict (name) do update
    set next_run_at = case when s.cron <> excluded.cron or (excluded.enabled and not s.enabled)
                           then excluded.next_run_at else s.next_run_at end,
        cron = excluded.cron, task_type = excluded.task_type, payload = excluded.payload,
        priority = excluded.priority, max_attempts = excluded.max_attempts, enabled = excluded.enabled,
        updated_at = now()
    returning (xmax = 0) into _created;
    if _task_type in ('db_function', 'email', 'sms', 'file_delete') then
        perform internal.drop_enqueue_permits();
    end if;
    return _created;
end $_$;
revoke all on function queues.put_schedule(text, text, text, jsonb, integer, integer, boolean, timestamp with time zone) from public;
