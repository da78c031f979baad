-- A time the system can hold and every client can read: finite, and within years 1 to 9999
-- (what ISO 8601 dates, Go's time.Time JSON and most languages' date types read). NULL is fine.
create or replace function internal.time_in_range(_t timestamptz) returns boolean
language sql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
    select _t is null or (_t >= '0001-01-01 00:00:00+00' and _t < '10000-01-01 00:00:00+00')
$$;
revoke all on function internal.time_in_range(timestamp with time zone) from public;
