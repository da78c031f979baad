-- Counts the end of each given parent (_outcomes: its status, completed, failed, dead or
-- cancelled) for its waiting children, in the transaction that ended it (docs/workflows.md):
-- each edge is deleted once (the delete decides who counts it), a child whose policy is 'cancel'
-- and whose parent did not complete is cancelled, with an event naming the parent, and its own
-- children in turn (a loop, not recursion: a 1,000-deep chain costs no stack); otherwise the
-- parent's stripe counter is decremented, and the decrement that empties the child's last stripe
-- releases it ('pending', due at once or at its scheduled time). Locks the parents' edges, then
-- per child in id order its stripes in order, then its row; it never locks a child's edge or
-- stripe after that child's row (a cancelled child keeps its other edges and counters until they
-- are counted or the child is deleted), so sessions ending parents of the same children at once
-- lock in one order. Returns how many children it released.
create or replace function internal.resolve_parents(_ids bigint[], _outcomes queues.task_status[])
returns integer
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _c bigint[];
    _s integer[];
    _p bigint[];
    _o queues.task_status[];
    _next_ids bigint[];
    _next_out queues.task_status[];
    _left integer;
    _r record;
    _stripe integer;
    _n integer;
    _emptied integer;
    _status queues.task_status;
    _policy text;
    _attempt integer;
    _released integer := 0;
    _outer text := coalesce(current_setting('taskorch.resolving_parents', true), '');
begin
    -- The cancellations below end tasks too: this loop counts them, not the row trigger.
    perform set_config('taskorch.resolving_parents', 'on', true);
    while coalesce(cardinality(_ids), 0) > 0 loop
        with d as (
            delete from queues.task_edge e
            using unnest(_ids, _outcomes) as x(id, outcome)
            where e.parent_id = x.id
            returning e.child_id, e.stripe, e.parent_id, x.outcome
        )
        select array_agg(d.child_id order by d.child_id, d.stripe, d.parent_id),
               array_agg(d.stripe order by d.child_id, d.stripe, d.parent_id),
               array_agg(d.parent_id order by d.child_id, d.stripe, d.parent_id),
               array_agg(d.outcome order by d.child_id, d.stripe, d.parent_id)
        into _c, _s, _p, _o
        from d;
        _next_ids := '{}';
        _next_out := '{}';
        -- Per child, in id order: its stripes in order, then its row (so that two sessions
        -- counting parents of the same children lock in one order).
        for _r in
            select e.child_id,
                   (array_agg(e.parent_id order by e.parent_id) filter (where e.outcome <> 'completed'))[1] as failed_parent,
                   (array_agg(e.outcome order by e.parent_id) filter (where e.outcome <> 'completed'))[1] as failed_outcome,
                   array_agg(e.stripe order by e.stripe) as stripes
            from unnest(_c, _s, _p, _o) as e(child_id, stripe, parent_id, outcome)
            group by e.child_id
            order by e.child_id
        loop
            select t.status, t.on_parent_failure into _status, _policy
            from queues.task t where t.task_id = _r.child_id;
            continue when _status is distinct from 'waiting';
            if _r.failed_parent is not null and _policy = 'cancel' then
                update queues.task t
                set status = 'cancelled', cancelled_at = clock_timestamp()
                where t.task_id = _r.child_id and t.status = 'waiting'
                returning t.attempt into _attempt;
                continue when not found;
                insert into queues.task_event (task_id, event, from_status, to_status, worker_id, attempt, detail)
                values (_r.child_id, 'cancelled', 'waiting', 'cancelled', session_user, _attempt,
                        format('parent task %s ended %s', _r.failed_parent, _r.failed_outcome));
                _next_ids := _next_ids || _r.child_id;
                _next_out := _next_out || 'cancelled'::queues.task_status;
                continue;
            end if;
            _emptied := 0;
            for _stripe, _n in
                select x.stripe, count(*)::integer from unnest(_r.stripes) as x(stripe) group by x.stripe order by x.stripe
            loop
                update queues.task_wait_stripe w set pending = w.pending - _n
                where w.child_id = _r.child_id and w.stripe = _stripe
                returning w.pending into _left;
                if _left = 0 then
                    _emptied := _emptied + 1;
                end if;
            end loop;
            continue when _emptied = 0;
            _status := null;
            update queues.task t
            set waiting_stripes = t.waiting_stripes - _emptied,
                status = case when t.waiting_stripes = _emptied then 'pending' else t.status end,
                run_at = case when t.waiting_stripes = _emptied then greatest(t.scheduled_at, clock_timestamp()) else t.run_at end
            where t.task_id = _r.child_id and t.status = 'waiting'
            returning t.status into _status;
            if _status = 'pending' then
                _released := _released + 1;
                delete from queues.task_wait_stripe w where w.child_id = _r.child_id;
            end if;
        end loop;
        _ids := _next_ids;
        _outcomes := _next_out;
    end loop;
    perform set_config('taskorch.resolving_parents', _outer, true);
    if _released > 0 then
        perform pg_notify('taskorch_task', '');
    end if;
    return _released;
end $$;
revoke all on function internal.resolve_parents(bigint[], queues.task_status[]) from public;
