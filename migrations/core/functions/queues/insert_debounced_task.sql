-- Inserts a debounced task (SECURITY DEFINER; what enqueue_debounced calls after its permit): one
-- pending task per (type, debounce key), its run time pushed back by _delay at each call while it
-- waits. A db_function task's key is its function's (queues.task.key_scope); keys beginning with
-- tick: or schedule: are the system's (22023). A task a limit governs is written with its limit
-- and bucket (internal.limit_of), by the insert or by the update of the task that holds the key:
-- one write, not a write and then an update (docs/limits.md, "Cost").
create or replace function queues.insert_debounced_task(
    _task_type text,
    _payload jsonb,
    _debounce_key text,
    _delay interval,
    _priority integer default 0,
    _max_attempts integer default null)
returns table (task_id bigint, debounced boolean)
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    _new bigint := nextval('queues.task_task_id_seq'::regclass);
    _id bigint;
    _run_at timestamptz;
    _limit_name text;
    _limit_key text;
begin
    perform internal.check_task_input(_task_type, _payload, _max_attempts, null, 'enqueue_debounced');
    if _debounce_key is null or length(_debounce_key) not between 1 and 512 then
        raise exception 'enqueue_debounced: the debounce key must be 1 to 512 characters, got %',
            coalesce(length(_debounce_key)::text, 'NULL') using errcode = 'invalid_parameter_value';
    end if;
    if _debounce_key ^@ 'tick:' or _debounce_key ^@ 'schedule:' then
        raise exception 'enqueue_debounced: the debounce key % begins with %, a prefix reserved for the system''s own tasks (supervisor and schedule ticks)',
            quote_literal(left(_debounce_key, 100)), quote_literal(split_part(_debounce_key, ':', 1) || ':')
            using errcode = 'invalid_parameter_value';
    end if;
    if _delay is null or _delay < interval '0' or _delay > interval '1 year' then
        raise exception 'enqueue_debounced: the delay must be between 0 and 1 year, got %', coalesce(_delay::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    _run_at := now() + _delay;
    if exists (select from queues.task_limit) then
        select l.task_type, internal.limit_key(l.key_field, _payload) into _limit_name, _limit_key
        from internal.limit_of(_task_type, _payload) l
        where l.task_type is not null;
    end if;

    -- Enqueued again, the task takes the new payload, and with it the payload's bucket.
    insert into queues.task as t (task_id, task_type, payload, priority, scheduled_at, run_at, max_attempts, debounce_key,
                                  limit_name, limit_key)
    values (_new, _task_type, _payload, coalesce(_priority, 0), _run_at, _run_at,
            coalesce(_max_attempts, queues.default_max_attempts()), _debounce_key, _limit_name, _limit_key)
    on conflict (task_type, key_scope, debounce_key) where status = 'pending' and debounce_key is not null
    do update set payload = excluded.payload, priority = excluded.priority,
                  scheduled_at = excluded.scheduled_at, run_at = excluded.run_at,
                  limit_name = excluded.limit_name, limit_key = excluded.limit_key
    returning t.task_id into _id;

    if _id <> _new then
        insert into queues.task_event (task_id, event, from_status, to_status, detail)
        values (_id, 'debounced', 'pending', 'pending', 'enqueued again; runs at ' || _run_at::text);
    end if;
    if _task_type in ('db_function', 'email', 'sms', 'file_delete') then
        perform internal.drop_enqueue_permits();
    end if;
    return query select _id, _id <> _new;
end $$;
revoke all on function queues.insert_debounced_task(text, jsonb, text, interval, integer, integer) from public;
