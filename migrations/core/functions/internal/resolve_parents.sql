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
-- children. Deletes the parents' edges, then locks per child in id order its stripes in order,
-- then its row (when it is cancelled, waits for this parent only, or one of its stripes empties),
-- in one ordered statement before any counter or row changes; it never locks a child's edge or
-- stripe after that child's row (a cancelled child keeps its other edges and counters until they
-- are counted or the child is deleted), so sessions ending parents of the same children at once
-- lock in one order.
--
-- With _worker_id and _take > 0 (a worker's completion, queues.complete_tasks_and_take), up to
-- _take of the children it releases are leased to that worker in the same update, instead of
-- made pending for a claim to lease them (docs/workflows.md, "Children run by the worker that
-- released them"): only a child no limit governs, of one of _task_types (NULL: any), of no paused
-- queue, due now, and of a priority no lower than the highest of the unlimited pending tasks.
-- Returns how many children it made pending (released) and the ids of those it leased (taken).
create or replace function internal.resolve_parents(
    _ids bigint[],
    _outcomes queues.task_status[],
    _worker_id text default null,
    _task_types text[] default null,
    _take integer default 0,
    _lease_duration interval default null,
    out released integer,
    out taken bigint[])
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
    _ktake boolean[];
    _got bigint[];
    _paused text[];
    _now timestamptz;
    _outer text := coalesce(current_setting('taskorch.resolving_parents', true), '');
begin
    -- The cancellations below end tasks too: this loop counts them, not the row trigger.
    perform set_config('taskorch.resolving_parents', 'on', true);
    released := 0;
    taken := '{}';
    while coalesce(cardinality(_ids), 0) > 0 loop
        -- One statement: the parents' edges are deleted (the delete decides who counts each),
        -- then per child, in id order, its stripes in order, then its row, are locked by nested
        -- loops that follow the children's order (so that two sessions counting parents of the
        -- same children lock in one order). A child that was not waiting when read is skipped,
        -- as is a stripe or row that has gone. Edges that are their own counters (stripe -1)
        -- empty as they are deleted: 'own' counts them.
        with d as (
            delete from queues.task_edge e
            using unnest(_ids, _outcomes) as x(id, outcome)
            where e.parent_id = x.id
            returning e.child_id, e.stripe, e.parent_id, x.outcome
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
        _ktake := null;
        if _kc is not null and _take > cardinality(taken) and _worker_id is not null then
            -- The children this release may lease to the worker (all their rows locked above).
            _paused := array(select qp.task_type from queues.queue_pause qp);
            _now := clock_timestamp();
            select array_agg(s.child_id is not null order by x.ord) into _ktake
            from unnest(_kc, _kind, _kemptied) with ordinality as x(child_id, kind, emptied, ord)
            left join (
                select t.task_id as child_id
                from queues.task t
                join unnest(_kc, _kind, _kemptied) as y(child_id, kind, emptied) on y.child_id = t.task_id
                where y.kind = 'count' and t.status = 'waiting' and t.waiting_stripes = y.emptied
                  and t.limit_name is null and t.scheduled_at <= _now
                  and (_task_types is null or t.task_type = any (_task_types))
                  and (coalesce(cardinality(_paused), 0) = 0
                       or (t.task_type <> all (_paused) and (t.key_scope = '' or t.task_type || ':' || t.key_scope <> all (_paused))))
                  and t.priority >= coalesce((select p.priority from queues.task p
                                              where p.status = 'pending' and p.limit_name is null
                                              order by (p.limit_name is null) desc, p.priority desc
                                              limit 1), t.priority)
                order by t.priority desc, t.task_id
                limit _take - cardinality(taken)
            ) s on s.child_id = x.child_id;
        end if;
        if _kc is not null then
            with u as (
                update queues.task t
                set status = case when x.kind = 'cancel' then 'cancelled'
                                  when x.take then 'running'
                                  when t.waiting_stripes = x.emptied then 'pending'
                                  else t.status end,
                    cancelled_at = case when x.kind = 'cancel' then clock_timestamp() else t.cancelled_at end,
                    waiting_stripes = case when x.kind = 'cancel' then t.waiting_stripes else t.waiting_stripes - x.emptied end,
                    run_at = case when x.kind = 'count' and t.waiting_stripes = x.emptied
                                  then greatest(t.scheduled_at, clock_timestamp()) else t.run_at end,
                    -- Leased to the worker as internal.lease_tasks leases a claimed task.
                    lease_id = case when x.take then nextval('queues.task_lease_task_lease_id_seq'::regclass) else t.lease_id end,
                    lease_expires_at = case when x.take then _now + _lease_duration else t.lease_expires_at end,
                    worker_id = case when x.take then _worker_id else t.worker_id end,
                    attempt = case when x.take then t.attempt + 1 else t.attempt end,
                    claimed_at = case when x.take then _now else t.claimed_at end,
                    debounce_key = case when x.take then null else t.debounce_key end
                from unnest(_kc, _kind, _kfp, _kfo, _kemptied, _kstriped,
                            coalesce(_ktake, array_fill(false, array[cardinality(_kc)])))
                     as x(child_id, kind, failed_parent, failed_outcome, emptied, striped, take)
                where t.task_id = x.child_id and t.status = 'waiting'
                returning t.task_id, t.status, t.attempt, t.lease_id, t.lease_expires_at, x.failed_parent, x.failed_outcome, x.striped
            ), leases as (
                insert into queues.task_lease (task_lease_id, task_id, worker_id, attempt, leased_at, expires_at)
                overriding system value
                select u.lease_id, u.task_id, _worker_id, u.attempt, _now, u.lease_expires_at
                from u where u.status = 'running'
            ), ev as (
                insert into queues.task_event (task_id, event, from_status, to_status, worker_id, attempt, detail)
                select u.task_id, 'cancelled', 'waiting', 'cancelled', session_user, u.attempt,
                       format('parent task %s ended %s', u.failed_parent, u.failed_outcome)
                from u where u.status = 'cancelled'
                order by u.task_id
            ), rel as (
                -- Stripes left at 0 by an earlier version, which kept them until the release.
                delete from queues.task_wait_stripe w
                using u where u.status in ('pending', 'running') and u.striped and w.child_id = u.task_id
            )
            select coalesce(array_agg(u.task_id order by u.task_id) filter (where u.status = 'cancelled'), '{}'),
                   count(*) filter (where u.status = 'pending')::integer,
                   coalesce(array_agg(u.task_id order by u.task_id) filter (where u.status = 'running'), '{}')
            into _ids, _n, _got
            from u;
            released := released + _n;
            taken := taken || _got;
            _outcomes := array_fill('cancelled'::queues.task_status, array[cardinality(_ids)]);
        end if;
    end loop;
    perform set_config('taskorch.resolving_parents', _outer, true);
    if released > 0 then
        perform pg_notify('taskorch_task', '');
    end if;
end $$;
revoke all on function internal.resolve_parents(bigint[], queues.task_status[], text, text[], integer, interval) from public;
