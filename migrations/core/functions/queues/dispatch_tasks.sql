-- Picks the due pending tasks not yet dispatched, in claim order within a window, marks them
-- dispatched to _transport and returns their ids, for the dispatcher to send. Tasks of limited
-- types are not sent: workers on a transport claim them with claim_limited_tasks. The window is
-- read from the claim index as queues.claim_tasks reads its candidates (internal.due_window).
create or replace function queues.dispatch_tasks(
    _transport text,
    _limit integer default 500,
    _min_window integer default 100,
    _task_types text[] default null)
returns setof bigint
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp set enable_sort = off set jit = off
set enable_seqscan = off set enable_bitmapscan = off as $$
declare
    _paused text[];
    _limited text[];
    _window integer;
    _ids bigint[];
begin
    if _limit is null or _limit < 1 then
        raise exception 'dispatch_tasks: _limit must be at least 1, got %', _limit using errcode = 'invalid_parameter_value';
    end if;

    perform queues.rescue_expired_leases();

    _paused := array(select qp.task_type from queues.queue_pause qp);
    _limited := array(select l.task_type from queues.task_limit l);
    _window := greatest(coalesce(_min_window, 100),
                        2 * coalesce((select sum(w.pool_size) from queues.worker w where w.transport = _transport), 0))::integer;

    -- The window, in claim order; of it, the tasks not dispatched yet (at most _limit). It reads
    -- the claim index as the claim does (internal.due_window): unlimited tasks first, one
    -- priority at a time, no task due later.
    select (array_agg(w.id order by w.ord) filter (
                where not internal.is_dispatched(t.dispatched_at, t.dispatch_lease_id, t.lease_id)))[1:_limit]
    into _ids
    from unnest(internal.due_window(_limited, _task_types, _paused, _window)) with ordinality as w(id, ord)
    join queues.task t on t.task_id = w.id;
    if coalesce(cardinality(_ids), 0) = 0 then
        return;
    end if;

    return query
    with picked as (
        select t.task_id
        from queues.task t
        where t.task_id = any (_ids)
          and t.status = 'pending'
          and t.run_at <= now()
          and not internal.is_dispatched(t.dispatched_at, t.dispatch_lease_id, t.lease_id)  -- re-checked under the lock
        order by t.task_id
        for update skip locked
    ), upd as (
        update queues.task t
        set dispatched_at = now(), dispatch_lease_id = t.lease_id
        from picked p
        where t.task_id = p.task_id
        returning t.task_id, t.priority, t.run_at
    )
    select u.task_id from upd u
    order by u.priority desc, u.run_at, u.task_id;
end $$;
revoke all on function queues.dispatch_tasks(text, integer, integer, text[]) from public;
grant execute on function queues.dispatch_tasks(text, integer, integer, text[]) to worker_service_user;
