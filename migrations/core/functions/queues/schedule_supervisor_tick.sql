-- Called by a tick at its end: schedules the next tick for the earliest due instance (_next,
-- null when none is due any more: then no tick is pending until a wake-up).
create or replace function queues.schedule_supervisor_tick(_supervisor text, _next timestamptz) returns void
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _next is not null then
        perform internal.schedule_supervisor_tick(_supervisor, greatest(_next, now()));
    end if;
end $$;
revoke all on function queues.schedule_supervisor_tick(text, timestamp with time zone) from public;
