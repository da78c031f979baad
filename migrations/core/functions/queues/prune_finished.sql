-- Retention of finished tasks (the leader's), without the lease and event rows: those go with
-- their day partitions (queues.maintain_history). Deletes up to _limit tasks in one of _statuses
-- (finished statuses only) that finished more than _older_than ago, with their error rows. Call it
-- again while it returns _limit: each call is one short transaction. Returns the number of tasks
-- deleted; NULL when _term is not the current leader term (nothing is deleted).
create or replace function queues.prune_finished(
    _older_than interval,
    _limit integer,
    _term bigint,
    _statuses queues.task_status[] default '{completed,cancelled}')
returns integer
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
-- Plans for the values of this call: a generic plan guesses the batch size and could pick
-- sequential scans of the task table.
set plan_cache_mode = force_custom_plan as $$
declare
    _ids bigint[];
    _status queues.task_status;
begin
    if _older_than is null or _older_than < interval '0' then
        raise exception 'prune_finished: older_than must not be negative, got %', _older_than
            using errcode = 'invalid_parameter_value';
    end if;
    if _limit is null or _limit not between 1 and 100000 then
        raise exception 'prune_finished: limit must be between 1 and 100000, got %', _limit
            using errcode = 'invalid_parameter_value';
    end if;
    if coalesce(cardinality(_statuses), 0) = 0
       or exists (select from unnest(_statuses) s where s is null or s not in ('completed', 'cancelled', 'failed', 'dead')) then
        raise exception 'prune_finished: statuses must be finished ones (completed, cancelled, failed, dead), got %', _statuses
            using errcode = 'invalid_parameter_value';
    end if;
    if not internal.holds_leader_term(_term) then
        return null;
    end if;

    -- One status at a time, oldest first: the order makes the planner walk task_finished_idx
    -- from its oldest entry for that status and stop after _limit rows (core/0004).
    foreach _status in array _statuses loop
        with doomed as (
            select t.task_id
            from queues.task t
            where t.status in ('completed', 'cancelled', 'failed', 'dead')  -- task_finished_idx's predicate
              and t.status = _status
              and greatest(t.completed_at, t.cancelled_at, t.failed_at, t.dead_at) < now() - _older_than
            order by greatest(t.completed_at, t.cancelled_at, t.failed_at, t.dead_at)
            limit _limit - coalesce(cardinality(_ids), 0)
            for update skip locked
        ), gone as (
            delete from queues.task t
            using doomed d
            where t.task_id = d.task_id
            returning t.task_id
        )
        select coalesce(_ids, '{}') || array_agg(g.task_id) into _ids from gone g;
        exit when cardinality(_ids) >= _limit;
    end loop;
    if coalesce(cardinality(_ids), 0) = 0 then
        return 0;
    end if;
    -- Errors go with their task, found through error_task_id_idx. Leases and events stay in
    -- their day partitions until queues.maintain_history drops the day.
    delete from queues.error where task_id = any (_ids);
    return cardinality(_ids);
end $$;
revoke all on function queues.prune_finished(interval, integer, bigint, queues.task_status[]) from public;
grant execute on function queues.prune_finished(interval, integer, bigint, queues.task_status[]) to worker_service_user;
