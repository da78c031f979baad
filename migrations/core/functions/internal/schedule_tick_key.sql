-- The idempotency key of a schedule's tick: schedule:<name>:<tick in UTC, RFC 3339, seconds>.
create or replace function internal.schedule_tick_key(_name text, _tick timestamptz) returns text
language sql stable parallel safe set search_path = pg_catalog, pg_temp as $$
    select 'schedule:' || _name || ':' || to_char(_tick at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
$$;
revoke all on function internal.schedule_tick_key(text, timestamp with time zone) from public;
