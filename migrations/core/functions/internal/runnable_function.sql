-- internal.runnable_function makes the runner's checks (the name's form, the payload
-- a JSON object, no system schema, USAGE on the schema, schema.name(jsonb) existing, EXECUTE on
-- it, a function returning jsonb) and returns the function as a quoted, callable
-- "schema"."name". Security invoker: the checks are the caller's privileges.
create or replace function internal.runnable_function(function_name text, payload jsonb) returns text
language plpgsql stable security invoker set search_path = pg_catalog, pg_temp as $fn$
declare
    _parts   text[];
    _schema  text;
    _name    text;
    _nsp     oid;
    _fn      regprocedure;
    _others  text;
    _kind    "char";
    _rettype oid;
    _retset  boolean;
begin
    if function_name is null or function_name = '' then
        raise exception 'run_function: function name must not be empty'
            using errcode = 'invalid_parameter_value';
    end if;
    -- Length first, so an oversized name costs no regex work. Identifiers longer than 63
    -- characters are refused, not silently truncated as PostgreSQL would.
    if length(function_name) <= 127 then
        _parts := regexp_match(function_name, '^([a-z_][a-z0-9_$]*)[.]([a-z_][a-z0-9_$]*)$');
    end if;
    if _parts is null or length(_parts[1]) > 63 or length(_parts[2]) > 63 then
        -- The name is shown as a JSON string: quotes and control characters escaped.
        raise exception 'run_function: function name % is malformed: expected schema.name, two lowercase SQL identifiers ([a-z_][a-z0-9_$]*, at most 63 characters each) without quotes, spaces or arguments',
            to_jsonb(left(function_name, 100))::text
            || case when length(function_name) > 100 then format(' (cut, %s characters)', length(function_name)) else '' end
            using errcode = 'invalid_parameter_value';
    end if;
    _schema := _parts[1];
    _name := _parts[2];

    if payload is null or jsonb_typeof(payload) <> 'object' then
        raise exception 'run_function: payload for %.% must be a JSON object, got %',
            _schema, _name, coalesce(jsonb_typeof(payload), 'null')
            using errcode = 'invalid_parameter_value';
    end if;

    -- System schemas hold no business functions. (PostgreSQL reserves the pg_ prefix.)
    if left(_schema, 3) = 'pg_' or _schema = 'information_schema' then
        raise exception 'run_function: % is in the system schema %; the runner calls application functions only',
            format('%I.%I', _schema, _name), _schema
            using errcode = 'insufficient_privilege';
    end if;

    -- The schema, and USAGE on it, before to_regprocedure: without USAGE it would raise
    -- PostgreSQL's own error rather than ours.
    select n.oid into _nsp from pg_catalog.pg_namespace n where n.nspname = _schema;
    if _nsp is null then
        raise exception 'run_function: function %(jsonb) does not exist: there is no schema %',
            format('%I.%I', _schema, _name), format('%I', _schema)
            using errcode = 'undefined_function';
    end if;
    if not has_schema_privilege(current_user, _nsp, 'usage') then
        raise exception 'run_function: permission denied for schema %: role % has no USAGE on it (grant usage on schema % to worker_service_user)',
            format('%I', _schema), current_user, format('%I', _schema)
            using errcode = 'insufficient_privilege';
    end if;

    _fn := to_regprocedure(format('%I.%I(pg_catalog.jsonb)', _schema, _name));
    if _fn is null then
        select string_agg(p.oid::regprocedure::text, ', ' order by p.oid::regprocedure::text) into _others
        from pg_catalog.pg_proc p
        where p.pronamespace = _nsp and p.proname = _name;
        raise exception 'run_function: function %(jsonb) does not exist%',
            format('%I.%I', _schema, _name),
            case when _others is null then ''
                 else format(' (found %s; the runner calls only functions taking exactly one jsonb argument)', _others) end
            using errcode = 'undefined_function';
    end if;

    if not has_function_privilege(current_user, _fn::oid, 'execute') then
        raise exception 'run_function: permission denied for function %: role % has no EXECUTE on it (grant execute on function % to worker_service_user)',
            _fn, current_user, _fn
            using errcode = 'insufficient_privilege';
    end if;

    select p.prokind, p.prorettype, p.proretset into _kind, _rettype, _retset
    from pg_catalog.pg_proc p where p.oid = _fn;
    if _kind <> 'f' then
        raise exception 'run_function: % is % and cannot be run; the runner calls functions returning jsonb',
            _fn, case _kind when 'p' then 'a procedure' when 'a' then 'an aggregate' when 'w' then 'a window function'
                            else format('of kind %s', _kind) end
            using errcode = 'invalid_parameter_value';
    end if;
    if _rettype <> 'pg_catalog.jsonb'::pg_catalog.regtype::oid or _retset then
        raise exception 'run_function: % returns %, not jsonb',
            _fn, case when _retset then 'setof ' else '' end || format_type(_rettype, null)
            using errcode = 'invalid_parameter_value';
    end if;

    return format('%I.%I', _schema, _name);
end $fn$;
revoke all on function internal.runnable_function(text, jsonb) from public;
grant execute on function internal.runnable_function(text, jsonb) to worker_service_user;
comment on function internal.runnable_function(text, jsonb) is 'The runner''s checks of a function name and its payload, as internal.run_function makes them; returns the quoted schema.name to call. See docs/security.md.';
