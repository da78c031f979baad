-- Extends the leases a worker holds, in task_id order, skipping a row locked at that moment
-- (renewed at the next tick): returns each task renewed with its new expiry and lease.
create or replace function queues.renew_leases(_task_ids bigint[], _lease_ids bigint[], _lease_duration interval default '5 minutes')
returns table (task_id bigint, lease_expires_at timestamptz, lease_id bigint)
language sql security definer set search_path = pg_catalog, pg_temp as $$
    -- SKIP LOCKED: a renewal never waits. A row locked now is being completed, cancelled or
    -- released (and then needs no renewal), or is locked by some long transaction: it is renewed
    -- at the next tick, and is not taken over meanwhile (the rescue of expired leases skips
    -- locked rows too).
    with held as (
        select t.task_id
        from queues.task t
        join unnest(_task_ids, _lease_ids) as c(task_id, lease_id) on t.task_id = c.task_id and t.lease_id = c.lease_id
        where t.lease_expires_at is not null  -- i.e. running
        order by t.task_id
        for no key update of t skip locked
    )
    update queues.task t
    set lease_expires_at = clock_timestamp() + _lease_duration
    from held h
    where t.task_id = h.task_id
    returning t.task_id, t.lease_expires_at, t.lease_id
$$;
revoke all on function queues.renew_leases(bigint[], bigint[], interval) from public;
grant execute on function queues.renew_leases(bigint[], bigint[], interval) to worker_service_user;
