-- Recovers the running tasks of the given workers, fenced by their leases, as the heartbeat
-- reaper does: back to pending, or to dead when that was their last attempt (the lost lease
-- counts as an attempt, so a task that kills its worker every time ends dead). Each gets a
-- 'recovered' event and a queues.error row: _detail is a format() string given the worker id,
-- the lease id, the attempt and the attempts allowed (%1$s to %4$s); _context is merged into
-- the error row's context. Rows locked by someone else are skipped. Wakes the workers when a
-- task went back to pending. The tasks it makes dead are counted in queues.task_dead_tally.
create or replace function internal.recover_worker_tasks(_worker_ids text[], _detail text, _context jsonb)
returns table (worker_id text, task_id bigint, status queues.task_status)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_custom_plan as $$
#variable_conflict use_column
declare
    _n bigint;
begin
    return query
    with picked as (
        -- The running tasks: a scan of the partial index of running tasks, which is small.
        select t.task_id
        from queues.task t
        where t.worker_id = any (_worker_ids) and t.status = 'running' and t.lease_expires_at is not null
        for update skip locked
    ), upd as (
        update queues.task t
        set status = case when t.attempt >= t.max_attempts then 'dead'::queues.task_status else 'pending' end,
            dead_at = case when t.attempt >= t.max_attempts then now() else t.dead_at end,
            run_at = case when t.attempt >= t.max_attempts then t.run_at else now() end,
            lease_expires_at = null,
            last_error = format(_detail, t.worker_id, t.lease_id, t.attempt, t.max_attempts)
        from picked p
        where t.task_id = p.task_id
        returning t.task_id, t.task_type, t.status, t.lease_id, t.worker_id, t.attempt, t.max_attempts, t.last_error
    ), tally as (
        insert into queues.task_dead_tally as d (task_type, dead)
        select u.task_type, count(*) from upd u where u.status = 'dead' group by u.task_type
        on conflict (task_type) do update set dead = d.dead + excluded.dead
    ), ev as (
        insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
        select u.task_id, 'recovered', 'running', u.status, u.lease_id, u.worker_id, u.attempt, u.last_error
        from upd u
    ), err as (
        insert into queues.error (task_id, error_message, context)
        select u.task_id, u.last_error,
               coalesce(_context, '{}') || jsonb_build_object('operation', 'recovered', 'worker_id', u.worker_id,
                                                              'lease_id', u.lease_id, 'attempt', u.attempt,
                                                              'max_attempts', u.max_attempts, 'outcome', u.status)
        from upd u
    )
    select u.worker_id, u.task_id, u.status from upd u;
    -- The rows returned are the tasks changed.
    get diagnostics _n = row_count;
    if _n > 0 then
        perform pg_notify('taskorch_task', '');
    end if;
end $$;
revoke all on function internal.recover_worker_tasks(text[], text, jsonb) from public;
