-- The advisory lock key of a supervisor's ticks, from its name.
create or replace function internal.supervisor_lock_id(_supervisor text) returns bigint
language plpgsql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
begin
    return hashtextextended('taskorch.supervisor_tick:' || _supervisor, 0);
end $$;
revoke all on function internal.supervisor_lock_id(text) from public;
