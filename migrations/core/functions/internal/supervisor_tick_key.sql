-- PL/pgSQL rather than SQL here and below: a SQL function with a SET clause is not inlined and
-- is planned at every call; these run for every instance made due.
create or replace function internal.supervisor_tick_key(_supervisor text) returns text
language plpgsql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
begin
    return 'tick:' || _supervisor;
end $$;
revoke all on function internal.supervisor_tick_key(text) from public;
