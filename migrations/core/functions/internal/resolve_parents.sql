-- Counts the end of each given parent (_outcomes: its status, completed, failed, dead or
-- cancelled) for its waiting children, in the transaction that ended it (docs/workflows.md):
-- each edge is deleted once (the delete decides who counts it), a child whose policy is 'cancel'
-- and whose parent did not complete is cancelled, with an event naming the parent, and its own
-- children in turn (a loop, not recursion: a 1,000-deep chain costs no stack); otherwise each of
-- the child's counters that the parent's end empties decrements its waiting_stripes, and the
-- decrement that reaches 0 releases it ('pending', due at once or at its scheduled time). A
-- counter is the edge itself (stripe -1: a child waiting for one parent) or a
-- queues.task_wait_stripe row (one up to 16 parents, else one per about sqrt(k) parents), deleted
-- when it empties. Set-based: a few statements per generation of parents, whatever the number of
-- children. Deletes the parents' edges and, in the same statement and in id order, releases
-- each child that waits for one parent only, which completed: only this session counts such a
-- child, so its row lock waits for no sibling's completion and holds none back. Then locks per
-- child in id order its stripes in order, then its row (when it is cancelled, waits for this
-- parent only, or one of its stripes empties), in one ordered statement before any counter or
-- row changes; it never locks a child's edge or stripe after that child's row (a cancelled child
-- keeps its other edges and counters until they are counted or the child is deleted), so
-- sessions ending parents of the same children at once lock in one order. Returns how many
-- children it released.
create or replace function internal.resolve_parents(_ids bigint[], _outcomes queues.task_status[])
returns integer
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    -- The children to change, in id order: kind 'cancel' or 'count'.
    _kc bigint[];
    _kind text[];
    _kfp bigint[];
    _kfo queues.task_status[];
    _kemptied integer[];
    _kstriped boolean[];
    -- The stripe rows to count (all locked): (child, stripe, by, whether it empties).
    _sc bigint[];
    _ss integer[];
    _sn integer[];
    _se boolean[];
    _n integer;
    -- The edges not counted by the first statement: (child, stripe, parent, parent's outcome).
    _ec bigint[];
    _es integer[];
    _ep bigint[];
    _eo queues.task_status[];
    _released integer := 0;
    _outer text := coalesce(current_setting('taskorch.resolving_parents', true), '');
begin
    -- The cancellations below end tasks too: this loop counts them, not the row trigger.
    perform set_config('taskorch.resolving_parents', 'on', true);
    while coalesce(cardinality(_ids), 0) > 0 loop
        -- The parents' edges are deleted (the delete decides who counts each). A child waiting
        -- for one parent (its edge, stripe -1, is its counter) whose parent completed is
        -- released at once, in child id order, by the same statement: nobody else counts it,
        -- and its row is locked before any other child's stripe or row (see the order below).
        -- The other edges are kept in arrays for the next statement.
        with d as (
            delete from queues.task_edge e
            using unnest(_ids, _outcomes) as x(id, outcome)
            where e.parent_id = x.id
            returning e.child_id, e.stripe, e.parent_id, x.outcome
        ), own as (
            update queues.task t
            set status = case when t.waiting_stripes = 1 then 'pending' else t.status end,
                waiting_stripes = t.waiting_stripes - 1,
                run_at = case when t.waiting_stripes = 1 then greatest(t.scheduled_at, clock_timestamp()) else t.run_at end
            from (select d.child_id from d where d.stripe < 0 and d.outcome = 'completed' order by d.child_id offset 0) o
            where t.task_id = o.child_id and t.status = 'waiting'
            returning t.status
        )
        select (select count(*) filter (where own.status = 'pending')::integer from own),
               array_agg(d.child_id), array_agg(d.stripe), array_agg(d.parent_id), array_agg(d.outcome)
        into _n, _ec, _es, _ep, _eo
        from d
        where not (d.stripe < 0 and d.outcome = 'completed');
        _released := _released + _n;
        _kc := null;
        _sc := null;

        -- The other edges, in one statement: per child, in id order, its stripes in order, then
        -- its row, are locked by nested loops that follow the children's order (so that two
        -- sessions counting parents of the same children lock in one order). A child that was
        -- not waiting when read is skipped, as is a stripe or row that has gone. Edges that are
        -- their own counters (stripe -1, here a parent that did not complete) empty as they are
        -- deleted: 'own' counts them.
        if _ec is not null then
        with d as (
            select * from unnest(_ec, _es, _ep, _eo) as d(child_id, stripe, parent_id, outcome)
        ), c as (
            select d.child_id,
                   min(d.parent_id) filter (where d.outcome <> 'completed') as failed_parent,
                   array_agg(d.parent_id) filter (where d.outcome <> 'completed') as failed_parents,
                   array_agg(d.outcome) filter (where d.outcome <> 'completed') as failed_outcomes,
                   count(*) filter (where d.stripe < 0)::integer as own,
                   array_agg(d.stripe) filter (where d.stripe >= 0) as edges
            from d
            group by d.child_id
            order by d.child_id
            offset 0
        ), k as (
            select c.child_id, c.failed_parent, c.failed_outcomes[array_position(c.failed_parents, c.failed_parent)] as failed_outcome,
                   c.own, c.edges,
                   case when c.failed_parent is not null and t.on_parent_failure = 'cancel' then 'cancel' else 'count' end as kind
            from c
            cross join lateral (
                select t.on_parent_failure from queues.task t where t.task_id = c.child_id and t.status = 'waiting' limit 1
            ) t
        ), l as (
            select k.child_id, k.kind, k.failed_parent, k.failed_outcome,
                   k.own + coalesce(ws.emptied, 0) as emptied, ws.stripes, ws.ns, ws.empties, k.edges is not null as striped,
                   r.task_id as row_locked
            from k
            left join lateral (
                select count(*) filter (where z.pending = z.n)::integer as emptied,
                       array_agg(z.stripe) as stripes, array_agg(z.n) as ns, array_agg(z.pending = z.n) as empties
                from (select w.stripe, w.pending, (select count(*)::integer from unnest(k.edges) as g(stripe) where g.stripe = w.stripe) as n
                      from queues.task_wait_stripe w
                      where k.kind = 'count' and k.edges is not null and w.child_id = k.child_id and w.stripe = any (k.edges)
                      order by w.stripe
                      for update) z
            ) ws on true
            left join lateral (
                select t.task_id
                from queues.task t
                where t.task_id = k.child_id and (k.kind = 'cancel' or k.own > 0 or ws.emptied > 0)
                for update
            ) r on true
        ), s as (
            select l.child_id, x.stripe, x.n, x.e
            from l cross join lateral unnest(l.stripes, l.ns, l.empties) as x(stripe, n, e)
            where l.kind = 'count'
        )
        -- (Arrays built by one aggregate each, from rows already in order: no sort per child.)
        select a.*, b.*
        into _kc, _kind, _kfp, _kfo, _kemptied, _kstriped, _sc, _ss, _sn, _se
        from (select array_agg(l.child_id) filter (where l.row_locked is not null),
                     array_agg(l.kind) filter (where l.row_locked is not null),
                     array_agg(l.failed_parent) filter (where l.row_locked is not null),
                     array_agg(l.failed_outcome) filter (where l.row_locked is not null),
                     array_agg(l.emptied) filter (where l.row_locked is not null),
                     array_agg(l.striped) filter (where l.row_locked is not null)
              from l) a
        cross join (select array_agg(s.child_id), array_agg(s.stripe), array_agg(s.n), array_agg(s.e) from s) b;
        end if;

        -- The counted stripes (all locked above): decremented, or deleted when they empty.
        if _sc is not null then
            with dec as (
                update queues.task_wait_stripe w set pending = w.pending - x.n
                from unnest(_sc, _ss, _sn, _se) as x(child_id, stripe, n, e)
                where not x.e and w.child_id = x.child_id and w.stripe = x.stripe
            )
            delete from queues.task_wait_stripe w
            using unnest(_sc, _ss, _se) as x(child_id, stripe, e)
            where x.e and w.child_id = x.child_id and w.stripe = x.stripe;
        end if;

        _ids := '{}';
        _outcomes := '{}';
        if _kc is not null then
            with u as (
                update queues.task t
                set status = case when x.kind = 'cancel' then 'cancelled'
                                  when t.waiting_stripes = x.emptied then 'pending'
                                  else t.status end,
                    cancelled_at = case when x.kind = 'cancel' then clock_timestamp() else t.cancelled_at end,
                    waiting_stripes = case when x.kind = 'cancel' then t.waiting_stripes else t.waiting_stripes - x.emptied end,
                    run_at = case when x.kind = 'count' and t.waiting_stripes = x.emptied
                                  then greatest(t.scheduled_at, clock_timestamp()) else t.run_at end
                from unnest(_kc, _kind, _kfp, _kfo, _kemptied, _kstriped) as x(child_id, kind, failed_parent, failed_outcome, emptied, striped)
                where t.task_id = x.child_id and t.status = 'waiting'
                returning t.task_id, t.status, t.attempt, x.failed_parent, x.failed_outcome, x.striped
            ), ev as (
                insert into queues.task_event (task_id, event, from_status, to_status, worker_id, attempt, detail)
                select u.task_id, 'cancelled', 'waiting', 'cancelled', session_user, u.attempt,
                       format('parent task %s ended %s', u.failed_parent, u.failed_outcome)
                from u where u.status = 'cancelled'
                order by u.task_id
            ), rel as (
                -- Stripes left at 0 by an earlier version, which kept them until the release.
                delete from queues.task_wait_stripe w
                using u where u.status = 'pending' and u.striped and w.child_id = u.task_id
            )
            select coalesce(array_agg(u.task_id order by u.task_id) filter (where u.status = 'cancelled'), '{}'),
                   count(*) filter (where u.status = 'pending')::integer
            into _ids, _n
            from u;
            _released := _released + _n;
            _outcomes := array_fill('cancelled'::queues.task_status, array[cardinality(_ids)]);
        end if;
    end loop;
    perform set_config('taskorch.resolving_parents', _outer, true);
    if _released > 0 then
        perform pg_notify('taskorch_task', '');
    end if;
    return _released;
end $$;
revoke all on function internal.resolve_parents(bigint[], queues.task_status[]) from public;
