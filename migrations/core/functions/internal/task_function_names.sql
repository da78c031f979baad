-- The names a task would have the worker call: a db_function task's function, a channel task's
-- handlers. Shapes that cannot be run are refused here, with the label of the caller.
create or replace function internal.task_function_names(_label text, _task_type text, _payload jsonb)
returns text[]
language plpgsql immutable set search_path = pg_catalog, pg_temp as $$
declare
    _names text[] := '{}';
    _key text;
    _v jsonb;
begin
    if _task_type = 'db_function' then
        _v := _payload -> 'db_function';
        if _v is null or jsonb_typeof(_v) <> 'string' or (_v #>> '{}') = '' then
            raise exception '%: a db_function task''s payload must name its function as a string, {"db_function": "schema.name", ...}; got %',
                _label, coalesce(left(_v::text, 100), 'no "db_function" field')
                using errcode = 'invalid_parameter_value';
        end if;
        return array[_v #>> '{}'];
    end if;
    if _task_type not in ('email', 'sms', 'file_delete') then
        return _names;
    end if;
    foreach _key in array array['before_handler', 'success_handler', 'error_handler'] loop
        _v := _payload -> _key;
        continue when _v is null or jsonb_typeof(_v) = 'null';
        if jsonb_typeof(_v) <> 'string' or (_v #>> '{}') = '' then
            raise exception '%: a % task''s "%" must name a function as a string, "schema.name"; got %',
                _label, _task_type, _key, left(_v::text, 100)
                using errcode = 'invalid_parameter_value';
        end if;
        _names := _names || (_v #>> '{}');
    end loop;
    return _names;
end $$;
revoke all on function internal.task_function_names(text, text, jsonb) from public;
