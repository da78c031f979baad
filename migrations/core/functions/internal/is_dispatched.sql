-- True when the task is dispatched for its current attempt.
create or replace function internal.is_dispatched(_dispatched_at timestamptz, _dispatch_lease_id bigint, _lease_id bigint)
returns boolean
language sql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
    select _dispatched_at is not null and _dispatch_lease_id is not distinct from _lease_id
$$;
revoke all on function internal.is_dispatched(timestamp with time zone, bigint, bigint) from public;
