-- Removes the limit of a task type, or of one SQL function's tasks ('db_function:<schema.function>'):
-- its tasks, waiting ones included, are claimed freely again (or under the limit of db_function,
-- for a function's). False when it had no limit; a name that could not have one (NULL, empty,
-- not a task type or not a function's queue) raises invalid_parameter_value.
create or replace function queues.remove_limit(_task_type text) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    delete from queues.task_limit where task_type = _task_type;
    if not found then
        if _task_type is null or _task_type !~ '^[A-Za-z][A-Za-z0-9_.:-]*$' or length(_task_type) > 128 then
            raise exception 'remove_limit: task type % is not valid (a letter, then letters, digits, _ . : -; at most 128)',
                coalesce(to_jsonb(left(_task_type, 130))::text, 'NULL') using errcode = 'invalid_parameter_value';
        end if;
        if _task_type like 'db_function:%' and _task_type !~ '^db_function:[a-z_][a-z0-9_$]*[.][a-z_][a-z0-9_$]*$' then
            raise exception 'remove_limit: % does not name a function: db_function:schema.name, two lowercase SQL identifiers',
                to_jsonb(left(_task_type, 130))::text using errcode = 'invalid_parameter_value';
        end if;
        return false;
    end if;
    perform internal.rekey_limited_tasks(_task_type);
    return true;
end $$;
revoke all on function queues.remove_limit(text) from public;
