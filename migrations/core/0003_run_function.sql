-- taskorch core: internal.run_function, the dispatcher through which a worker calls the SQL
-- functions named in task payloads (db_function supervisors; before, success and error
-- handlers). Seeds 000/002, "Function runner".
--
-- Security model
--
--   * The runner is SECURITY INVOKER. It runs with the privileges of its caller (the worker's
--     login user, a member of worker_service_user) and adds none: calling a function through
--     it takes exactly what calling it directly takes, USAGE on its schema and EXECUTE on it.
--     The runner only makes the call safe to build from data.
--   * Business functions (supervisors and handlers) are SECURITY DEFINER with
--     `set search_path = pg_catalog, pg_temp`, take (jsonb), return jsonb (the envelope), and
--     are granted to the worker one by one:
--         grant usage on schema biz to worker_service_user;
--         grant execute on function biz.my_supervisor(jsonb) to worker_service_user;
--     The worker holds no table privilege. What it can do is the list of functions it was
--     granted, and each of those does its work as its owner.
--   * The function name comes from a task payload, that is, from data, and never reaches SQL
--     as text. It must be `schema.name`, two plain lowercase identifiers. It is resolved with
--     to_regprocedure() on a string built with format('%I'), checked (one jsonb argument,
--     returns jsonb, EXECUTE granted to the caller), and called with format('%I.%I($1)') with
--     the payload as a bound parameter.
--
-- Refusals (SQLSTATE):
--   22023 invalid_parameter_value  empty or malformed name; payload not a JSON object; the
--                                  function is a procedure/aggregate or does not return jsonb
--   42883 undefined_function       no such schema, or no schema.name(jsonb)
--   42501 insufficient_privilege   a system schema (pg_*, information_schema); no USAGE on
--                                  the schema; no EXECUTE on the function
-- Errors raised by the called function propagate unchanged.

create function internal.run_function(function_name text, payload jsonb) returns jsonb
language plpgsql volatile security invoker set search_path = pg_catalog, pg_temp as $fn$
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
    _result  jsonb;
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

    execute format('select %I.%I($1)', _schema, _name) using payload into _result;
    return _result;
end $fn$;

comment on function internal.run_function(text, jsonb) is
    'Calls schema.name(jsonb) returns jsonb with the payload, as the caller (security invoker). Names are resolved safely; see docs/security.md.';

revoke all on function internal.run_function(text, jsonb) from public;
grant execute on function internal.run_function(text, jsonb) to worker_service_user;
