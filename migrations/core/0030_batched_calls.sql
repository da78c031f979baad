-- Calls in batches (docs/worker.md, "Before handlers and provider calls in batches"). A worker
-- whose slots run channel tasks calls their before handlers together: one statement for every
-- before handler asked for since the last one, each distinct function checked once and called
-- for all its payloads in one query. The dev outbox providers record their deliveries the same
-- way. And internal.run_function keeps its checks in one place, internal.runnable_function,
-- which the batch shares.

-- internal.runnable_function makes the runner's checks (core/0003: the name's form, the payload
-- a JSON object, no system schema, USAGE on the schema, schema.name(jsonb) existing, EXECUTE on
-- it, a function returning jsonb) and returns the function as a quoted, callable
-- "schema"."name". Security invoker: the checks are the caller's privileges.
create function internal.runnable_function(function_name text, payload jsonb) returns text
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

comment on function internal.runnable_function(text, jsonb) is
    'The runner''s checks of a function name and its payload, as internal.run_function makes them; returns the quoted schema.name to call. See docs/security.md.';
revoke all on function internal.runnable_function(text, jsonb) from public;
grant execute on function internal.runnable_function(text, jsonb) to worker_service_user;

-- The same function, the same refusals in the same order as before; its checks now live in
-- internal.runnable_function.
create or replace function internal.run_function(function_name text, payload jsonb) returns jsonb
language plpgsql volatile security invoker set search_path = pg_catalog, pg_temp as $fn$
declare
    _result jsonb;
begin
    execute format('select %s($1)', internal.runnable_function(function_name, payload)) using payload into _result;
    return _result;
end $fn$;

-- internal.run_functions makes many calls at once: _handlers[i](_payloads[i]) for every i, one
-- row (i, result) each, in no particular order. Every distinct name passes the runner's checks
-- once, before anything is called, and is then called for all its payloads in one query.
-- Anything that raises (a refusal, a bad payload, a function's own error) aborts the whole
-- call: the worker then makes each call on its own with internal.run_function, where the
-- failing one fails alone with the runner's own message.
create function internal.run_functions(_handlers text[], _payloads jsonb[])
returns table (ord integer, result jsonb)
language plpgsql volatile security invoker set search_path = pg_catalog, pg_temp as $fn$
declare
    _names   text[];
    _targets text[];
begin
    if coalesce(cardinality(_handlers), 0) <> coalesce(cardinality(_payloads), 0) then
        raise exception 'run_functions: % function names and % payloads; expected one of each per call',
            coalesce(cardinality(_handlers), 0), coalesce(cardinality(_payloads), 0)
            using errcode = 'invalid_parameter_value';
    end if;
    if exists (select from unnest(_payloads) p where p is null or jsonb_typeof(p) <> 'object') then
        raise exception 'run_functions: every payload must be a JSON object'
            using errcode = 'invalid_parameter_value';
    end if;
    -- Every name is checked before anything is called.
    _names := array(select distinct h from unnest(_handlers) h);
    _targets := array(select internal.runnable_function(n, '{}'::jsonb) from unnest(_names) n);
    for _i in 1 .. coalesce(cardinality(_names), 0) loop
        return query execute format(
            'select u.ord::integer, %s(u.p) from unnest($1::text[], $2::jsonb[]) with ordinality as u(h, p, ord) where u.h = $3',
            _targets[_i]) using _handlers, _payloads, _names[_i];
    end loop;
end $fn$;

comment on function internal.run_functions(text[], jsonb[]) is
    'Calls _handlers[i](_payloads[i]) for every i, as internal.run_function would, each distinct function checked once; (i, result) rows. See docs/worker.md.';
revoke all on function internal.run_functions(text[], jsonb[]) from public;
grant execute on function internal.run_functions(text[], jsonb[]) to worker_service_user;

-- queues.record_outbox_messages records many outbox deliveries at once, each exactly as
-- queues.record_outbox_message would (its rules included), in the order given: one row
-- (i, result) each. A worker's dev outbox provider sends its concurrent calls through it, one
-- statement and one commit for all (docs/providers.md). Anything that raises aborts the whole
-- call; the provider then records each on its own.
create function queues.record_outbox_messages(_task_ids bigint[], _channels text[], _requests jsonb[])
returns table (ord integer, result jsonb)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $fn$
declare
    _n integer := coalesce(cardinality(_channels), 0);
begin
    if coalesce(cardinality(_task_ids), 0) <> _n or coalesce(cardinality(_requests), 0) <> _n then
        raise exception 'record_outbox_messages: % task ids, % channels and % requests; expected one of each per message',
            coalesce(cardinality(_task_ids), 0), _n, coalesce(cardinality(_requests), 0)
            using errcode = 'invalid_parameter_value';
    end if;
    for _i in 1 .. _n loop
        ord := _i;
        result := queues.record_outbox_message(_task_ids[_i], _channels[_i], _requests[_i]);
        return next;
    end loop;
end $fn$;

comment on function queues.record_outbox_messages(bigint[], text[], jsonb[]) is
    'queues.record_outbox_message for many messages in one call, in order; (i, result) rows. See docs/providers.md.';
revoke all on function queues.record_outbox_messages(bigint[], text[], jsonb[]) from public;
grant execute on function queues.record_outbox_messages(bigint[], text[], jsonb[]) to worker_service_user;

-- queues.run_task_handlers (core/0027), the success handlers the completer runs with its
-- completions, now locks every lease first and then runs the handlers through
-- internal.run_functions: each distinct handler checked once and called for all its tasks in
-- one query, instead of the runner's checks and a dynamic statement per task. Same rows, same
-- contract: a handler that raises aborts the whole call, and the worker then runs each task of
-- the batch on its own.
create or replace function queues.run_task_handlers(_task_ids bigint[], _lease_ids bigint[], _handlers text[], _bodies jsonb[])
returns table (task_id bigint, held boolean, envelope jsonb)
language plpgsql volatile security invoker set search_path = pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    _n    integer := coalesce(cardinality(_task_ids), 0);
    _held integer[];  -- the positions whose lease is held, in order
begin
    if coalesce(cardinality(_lease_ids), 0) <> _n or coalesce(cardinality(_handlers), 0) <> _n
       or coalesce(cardinality(_bodies), 0) <> _n then
        raise exception 'run_task_handlers: % task ids, % lease ids, % handlers and % bodies; expected one of each per task',
            _n, coalesce(cardinality(_lease_ids), 0), coalesce(cardinality(_handlers), 0), coalesce(cardinality(_bodies), 0)
            using errcode = 'invalid_parameter_value';
    end if;
    _held := array[]::integer[];
    for _i in 1 .. _n loop
        if queues.lock_lease(_task_ids[_i], _lease_ids[_i]) then
            _held := _held || _i;
        else
            task_id := _task_ids[_i];
            held := false;
            envelope := null;
            return next;
        end if;
    end loop;
    if cardinality(_held) = 0 then
        return;
    end if;
    return query
        select _task_ids[_held[r.ord]], true, r.result
        from internal.run_functions(
            array(select _handlers[h] from unnest(_held) with ordinality as u(h, k) order by k),
            array(select _bodies[h] from unnest(_held) with ordinality as u(h, k) order by k)) as r;
end $$;
