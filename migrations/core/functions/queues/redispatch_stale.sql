-- The reclaimer's step: walks task_dispatched_idx from the oldest mark, over the pending tasks
-- marked more than _older_than ago (at most _limit), and for each:
--   - due, not paused: marks it dispatched now and returns its id to be sent again. When the
--     mark was for the current attempt, its message was lost (or is stuck behind a dead
--     consumer): a 'redispatched' event records it.
--   - otherwise (scheduled later after a retry, or paused): clears the mark; the dispatcher sends
--     it when it is due, or resumed.
-- Tasks of other types than _task_types (NULL: all) are left to the workers that run them.
-- Returns the ids to send, in claim order.
create or replace function queues.redispatch_stale(
    _older_than interval,
    _limit integer default 1000,
    _task_types text[] default null)
returns setof bigint
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
set enable_sort = off set jit = off as $$
declare
    _paused text[];
begin
    if _older_than is null or _older_than < interval '0' then
        raise exception 'redispatch_stale: _older_than must not be negative, got %', _older_than
            using errcode = 'invalid_parameter_value';
    end if;
    _paused := array(select qp.task_type from queues.queue_pause qp);

    return query
    with stale as (
        select t.task_id,
               internal.is_dispatched(t.dispatched_at, t.dispatch_lease_id, t.lease_id) as lost,
               t.run_at <= now() and (cardinality(_paused) = 0 or (t.task_type <> all (_paused) and (t.key_scope = '' or t.task_type || ':' || t.key_scope <> all (_paused)))) as send
        from queues.task t
        where t.status = 'pending' and t.dispatched_at is not null  -- task_dispatched_idx's predicate
          and t.dispatched_at < now() - _older_than
          and (_task_types is null or t.task_type = any (_task_types))
        order by t.dispatched_at
        limit coalesce(_limit, 1000)
        for update skip locked
    ), upd as (
        update queues.task t
        set dispatched_at = case when s.send then now() end,
            dispatch_lease_id = t.lease_id
        from stale s
        where t.task_id = s.task_id
        returning t.task_id, t.priority, t.run_at, t.lease_id, t.worker_id, t.attempt, s.send, s.lost
    ), ev as (
        insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
        select u.task_id, 'redispatched', 'pending', 'pending', u.lease_id, null, u.attempt,
               format('dispatched but not claimed within %s: sent again', _older_than)
        from upd u
        where u.send and u.lost
    )
    select u.task_id from upd u
    where u.send
    order by u.priority desc, u.run_at, u.task_id;
end $$;
revoke all on function queues.redispatch_stale(interval, integer, text[]) from public;
grant execute on function queues.redispatch_stale(interval, integer, text[]) to worker_service_user;
