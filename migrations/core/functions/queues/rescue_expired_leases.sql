-- Returns tasks whose lease expired to pending (or dead after their last attempt), each an attempt
-- that failed, with a lease_expired event and an error; every claim runs it first. Skips a row
-- locked by a running db_function. The dead ones are counted in queues.task_dead_tally, which
-- the leader reports (taskorch_tasks_failed_total{outcome="dead"}).
create or replace function queues.rescue_expired_leases(_limit integer default 1000) returns integer
language plpgsql security definer set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan as $$
declare
    _n integer;
    _dead text[];
    _now timestamptz := clock_timestamp();
begin
    with expired as (
        select t.task_id
        from queues.task t
        where t.status = 'running' and t.lease_expires_at < _now
        order by t.lease_expires_at
        limit _limit
        for update skip locked
    ), upd as (
        update queues.task t
        set status = case when t.attempt >= t.max_attempts then 'dead'::queues.task_status else 'pending' end,
            dead_at = case when t.attempt >= t.max_attempts then _now else t.dead_at end,
            -- now(), the claim's own time: the claim that rescues the task may take it.
            run_at = case when t.attempt >= t.max_attempts then t.run_at else now() end,
            lease_expires_at = null,
            last_error = format('lease %s expired: worker %s did not finish attempt %s of %s',
                                t.lease_id, coalesce(t.worker_id, '(none)'), t.attempt, t.max_attempts)
        from expired e
        where t.task_id = e.task_id
        returning t.task_id, t.task_type, t.status, t.lease_id, t.worker_id, t.attempt, t.last_error
    ), ev as (
        -- Stamped with the claim's time, as the lease the same claim may then write: the expiry
        -- comes first in the task's history.
        insert into queues.task_event (task_id, occurred_at, event, from_status, to_status, lease_id, worker_id, attempt, detail)
        select u.task_id, now(), 'lease_expired', 'running', u.status, u.lease_id, u.worker_id, u.attempt, u.last_error
        from upd u
    ), err as (
        insert into queues.error (task_id, occurred_at, error_message, context)
        select u.task_id, now(), u.last_error,
               jsonb_build_object('operation', 'lease_expired', 'lease_id', u.lease_id,
                                  'worker_id', u.worker_id, 'attempt', u.attempt)
        from upd u
    )
    select count(*), array_agg(u.task_type) filter (where u.status = 'dead') into _n, _dead from upd u;
    -- Counted apart, only when a task went dead: the claims' common case, nothing expired, stays
    -- as cheap as it was.
    if _dead is not null then
        insert into queues.task_dead_tally as d (task_type, dead)
        select x.task_type, count(*) from unnest(_dead) as x(task_type) group by x.task_type
        on conflict (task_type) do update set dead = d.dead + excluded.dead;
    end if;
    return _n;
end $$;
revoke all on function queues.rescue_expired_leases(integer) from public;
grant execute on function queues.rescue_expired_leases(integer) to worker_service_user;
