-- internal.run_functions makes many calls at once: _handlers[i](_payloads[i]) for every i, one
-- row (i, result) each, in no particular order. Every distinct name passes the runner's checks
-- once, before anything is called, and is then called for all its payloads in one query.
-- Anything that raises (a refusal, a bad payload, a function's own error) aborts the whole
-- call: the worker then makes each call on its own with internal.run_function, where the
-- failing one fails alone with the runner's own message.
create or replace function internal.run_functions(_handlers text[], _payloads jsonb[])
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
revoke all on function internal.run_functions(text[], jsonb[]) from public;
grant execute on function internal.run_functions(text[], jsonb[]) to worker_service_user;
comment on function internal.run_functions(text[], jsonb[]) is 'Calls _handlers[i](_payloads[i]) for every i, as internal.run_function would, each distinct function checked once; (i, result) rows. See docs/worker.md.';
