-- How long after a wake-up notification an enqueue may skip its own: read by the enqueue
-- trigger once per inserting statement. A primary key lookup, planned once per session (in
-- PL/pgSQL; a SQL function's query would be planned again in every transaction): about 2.5 us.
create or replace function queues.notify_coalesce_ms() returns integer
language plpgsql stable parallel safe as $$
begin
    return (select s.notify_coalesce_ms from queues.settings s where s.singleton);
end $$;
revoke all on function queues.notify_coalesce_ms() from public;
