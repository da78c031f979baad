-- Removes a schedule. Tasks it enqueued stay. True when it existed.
create or replace function queues.remove_schedule(_name text) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    delete from queues.schedule where name = _name;
    return found;
end $$;
revoke all on function queues.remove_schedule(text) from public;
