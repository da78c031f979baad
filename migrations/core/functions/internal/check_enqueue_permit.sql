-- The permit's check. SECURITY INVOKER, as its trigger: it runs as the role inserting the permit,
-- whose rights are the ones checked. It calls only pg_catalog: the caller has no USAGE on internal.
create or replace function internal.check_enqueue_permit() returns trigger
language plpgsql security invoker set search_path = pg_catalog, pg_temp as $_$
declare
    _name text;
    _parts text[];
    _nsp oid;
    _fn oid;
begin
    new.permit_xid := pg_current_xact_id();
    new.granted_to := current_user;
    new.created_at := clock_timestamp();
    if new.names is null or cardinality(new.names) = 0 or array_position(new.names, null) is not null then
        raise exception 'enqueue: a permit names one or more functions, got %', coalesce(new.names::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    foreach _name in array new.names loop
        _parts := null;
        if length(_name) <= 127 then
            _parts := regexp_match(_name, '^([a-z_][a-z0-9_$]*)[.]([a-z_][a-z0-9_$]*)$');
        end if;
        if _parts is null or length(_parts[1]) > 63 or length(_parts[2]) > 63 then
            raise exception 'enqueue: function name % is malformed: expected schema.name, two lowercase SQL identifiers ([a-z_][a-z0-9_$]*, at most 63 characters each) without quotes, spaces or arguments',
                to_jsonb(left(_name, 100))::text
                using errcode = 'invalid_parameter_value';
        end if;
        select n.oid into _nsp from pg_catalog.pg_namespace n where n.nspname = _parts[1];
        _fn := null;
        if _nsp is not null then
            select p.oid into _fn from pg_catalog.pg_proc p
            where p.pronamespace = _nsp and p.proname = _parts[2]
              and p.proargtypes = '3802'::pg_catalog.oidvector;  -- exactly one jsonb argument
        end if;
        if _fn is null then
            raise exception 'enqueue: function %(jsonb) does not exist: a task can name only an existing function taking one jsonb argument',
                format('%I.%I', _parts[1], _parts[2])
                using errcode = 'undefined_function';
        end if;
        if not has_schema_privilege(current_user, _nsp, 'usage') or not has_function_privilege(current_user, _fn, 'execute') then
            raise exception 'enqueue: role % may not enqueue a task naming %: it may not execute that function itself',
                current_user, _fn::regprocedure
                using errcode = 'insufficient_privilege',
                      detail = 'A db_function task''s function and a channel task''s handlers run with the worker''s rights; a task may name only a function the role enqueueing it may execute (docs/security.md, "Who may name a function").',
                      hint = 'Enqueue it from a function that runs as a role allowed to (a SECURITY DEFINER kickoff), or grant execute on the function to this role.';
        end if;
    end loop;
    return new;
end $_$;
revoke all on function internal.check_enqueue_permit() from public;
