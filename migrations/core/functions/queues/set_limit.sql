-- Creates or replaces the limit of a task type (a type with no tasks yet is fine), or, named
-- 'db_function:<schema.function>', of the db_function tasks of that function, which then do not
-- count under a limit of db_function itself:
--   _max_running      at most that many tasks of the type running at once, across every worker;
--   _rate_per_second  at most that many claims per second, with bursts of up to _burst (a token
--                     bucket kept in queues.limit_bucket, so it holds across workers and restarts);
--   _key_field        a top-level payload field: both apply per distinct value of it instead
--                     of to the type as a whole. A task whose field is missing, null, an object
--                     or an array counts in one more bucket, the null-key bucket.
-- At least one of _max_running and _rate_per_second is required. Replacing a limit keeps its
-- buckets' tokens unless the key field changes.
create or replace function queues.set_limit(
    _task_type text,
    _max_running integer default null,
    _rate_per_second double precision default null,
    _burst integer default null,
    _key_field text default null)
returns void
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _old queues.task_limit;
begin
    if _task_type is null or _task_type !~ '^[A-Za-z][A-Za-z0-9_.:-]*$' or length(_task_type) > 128 then
        raise exception 'set_limit: task type % is not valid (a letter, then letters, digits, _ . : -; at most 128)',
            coalesce(to_jsonb(left(_task_type, 130))::text, 'NULL') using errcode = 'invalid_parameter_value';
    end if;
    if _task_type like 'db_function:%' and _task_type !~ '^db_function:[a-z_][a-z0-9_$]*[.][a-z_][a-z0-9_$]*$' then
        raise exception 'set_limit: % does not name a function: db_function:schema.name, two lowercase SQL identifiers',
            to_jsonb(left(_task_type, 130))::text using errcode = 'invalid_parameter_value';
    end if;
    if _max_running is null and _rate_per_second is null then
        raise exception 'set_limit: give _max_running, _rate_per_second or both (to lift the limit of %, call queues.remove_limit)', _task_type
            using errcode = 'invalid_parameter_value';
    end if;
    if _max_running < 1 then
        raise exception 'set_limit: _max_running must be at least 1, got %', _max_running using errcode = 'invalid_parameter_value';
    end if;
    if _rate_per_second <= 0 or _rate_per_second > 1000000 or _rate_per_second = 'NaN' then
        raise exception 'set_limit: _rate_per_second must be above 0 and at most 1000000, got %', _rate_per_second
            using errcode = 'invalid_parameter_value';
    end if;
    if _burst is not null and _rate_per_second is null then
        raise exception 'set_limit: _burst needs _rate_per_second' using errcode = 'invalid_parameter_value';
    end if;
    if _burst < 1 or _burst > 1000000 then
        raise exception 'set_limit: _burst must be between 1 and 1000000, got %', _burst using errcode = 'invalid_parameter_value';
    end if;
    if _key_field is not null and _key_field !~ '^[A-Za-z_][A-Za-z0-9_]{0,62}$' then
        raise exception 'set_limit: key field % is not a plain identifier (a letter or _, then letters, digits or _; at most 63)',
            to_jsonb(left(_key_field, 70))::text using errcode = 'invalid_parameter_value';
    end if;

    select * into _old from queues.task_limit where task_type = _task_type for update;
    insert into queues.task_limit as l (task_type, max_running, rate_per_second, burst, key_field)
    values (_task_type, _max_running, _rate_per_second, coalesce(_burst, 1), _key_field)
    on conflict (task_type) do update
    set max_running = excluded.max_running, rate_per_second = excluded.rate_per_second,
        burst = excluded.burst, key_field = excluded.key_field, updated_at = now();

    if _old.task_type is null or _old.key_field is distinct from _key_field then
        delete from queues.limit_bucket b where b.task_type = _task_type;
        perform internal.rekey_limited_tasks(_task_type);
    end if;
end $$;
revoke all on function queues.set_limit(text, integer, double precision, integer, text) from public;
