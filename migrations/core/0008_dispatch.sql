-- Delivery over a message transport (Redis Streams, SQS), with PostgreSQL as the only truth
-- (DESIGN §2 "Delivery"; seeds 003 and 004; docs/transports.md).
--
-- A *dispatcher* marks due pending tasks as dispatched and sends their ids to the transport; a
-- worker that receives an id claims the task here (queues.claim_tasks_by_id): exactly one claim
-- wins, whatever the transport duplicated, delayed or reordered. A *reclaimer* dispatches again
-- the tasks dispatched but not claimed within a window: their message was lost.
--
-- The dispatch mark is two columns on the task, written by the dispatcher only:
--   dispatched_at      when the task's id was last sent
--   dispatch_lease_id  the task's lease_id at that moment (NULL before its first claim)
-- A task is *dispatched for its current attempt* while dispatched_at is set and
-- dispatch_lease_id is not distinct from lease_id. Every claim gives the task a new lease_id, so
-- a task that comes back to pending (retry, expired lease, release, snooze, reaped worker) is
-- undispatched again without any of those functions touching the mark: the claim path and the
-- postgres transport pay nothing for it. Enqueueing writes neither column (they are NULL), so
-- no index entry is added at enqueue either.

alter table queues.task
    add column dispatched_at     timestamptz,
    add column dispatch_lease_id bigint;

comment on column queues.task.dispatched_at is
    'When a dispatcher last sent the task''s id to the transport (redis, sqs). NULL: never, or the mark was cleared.';
comment on column queues.task.dispatch_lease_id is
    'The task''s lease_id when it was dispatched: the dispatch is current while this equals lease_id.';

-- Plans. The three functions below read a few rows in an index's order (claim order, task id,
-- dispatch time) and must never sort the whole backlog to do it: they run with enable_sort off,
-- which keeps the planner on the ordered index scan even when the table's statistics are missing
-- or stale (a fresh queue, before autovacuum has analyzed it), or when a generic plan guesses
-- that LIMIT _window reads a tenth of the table. Measured: with 20,000 pending tasks and no
-- statistics a dispatch pass otherwise sorted all of them, every pass. (And jit off: the cost
-- a disabled sort adds to a plan would otherwise make PostgreSQL JIT-compile these short
-- statements, half a second each.)

-- The reclaimer's index: pending tasks that carry a dispatch mark, oldest mark first. Only the
-- dispatcher puts a task here (enqueue and the postgres transport never do); a claim takes it
-- out (status becomes running). The reclaimer reads it from the oldest end and stops at the
-- window, so it visits only the marks it has to act on.
create index task_dispatched_idx
    on queues.task (dispatched_at)
    where status = 'pending' and dispatched_at is not null;

-- True when the task is dispatched for its current attempt.
create function internal.is_dispatched(_dispatched_at timestamptz, _dispatch_lease_id bigint, _lease_id bigint)
returns boolean
language sql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
    select _dispatched_at is not null and _dispatch_lease_id is not distinct from _lease_id
$$;

-- Claims the given tasks for a worker that received their ids from a transport: each one that
-- is pending, due, of a type the worker runs (_task_types, NULL: all) and not paused is claimed
-- exactly as claim_tasks claims (a task_lease row whose id is the fencing token, a 'claimed'
-- event). The others are not claimed: already claimed by another worker (a duplicate message),
-- finished, not due yet, paused, or unknown (pruned). Returns the claimed tasks in claim order.
-- Duplicate ids are claimed once.
--
-- Locks are waited for, not skipped: a pending row can be locked for a moment by a dispatcher
-- whose pass saw it undispatched in its snapshot (it locks, re-checks, and leaves it, but keeps
-- the lock until its statement ends). Skipping would refuse the one message that was sent for
-- the task and leave it to the reclaimer. The wait is short (every other locker of a pending
-- row is one short statement) and cannot deadlock: claims lock in task id order, and the other
-- multi-row lockers (claim_tasks, dispatch_tasks, redispatch_stale, rescue_expired_leases)
-- skip locked rows rather than wait. A row that is running in the claim's snapshot is not
-- locked at all.
create function queues.claim_tasks_by_id(
    _worker_id text,
    _task_ids bigint[],
    _lease_duration interval default interval '5 minutes',
    _task_types text[] default null)
returns setof queues.task
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
set enable_sort = off set jit = off as $$
declare
    _paused text[];
begin
    if _lease_duration is null or _lease_duration <= interval '0' then
        raise exception 'claim_tasks_by_id: _lease_duration must be positive, got %', _lease_duration
            using errcode = 'invalid_parameter_value';
    end if;
    if coalesce(cardinality(_task_ids), 0) = 0 then
        return;
    end if;

    -- A message redelivered after its worker died finds the task still running under an
    -- expired lease: rescue first, as claim_tasks does (cheap when nothing has expired).
    perform queues.rescue_expired_leases();

    _paused := array(select qp.task_type from queues.queue_pause qp);

    return query
    with picked as (
        select t.task_id, t.attempt
        from queues.task t
        where t.task_id = any (_task_ids)
          and t.status = 'pending'
          and t.run_at <= now()
          and (_task_types is null or t.task_type = any (_task_types))
          and (cardinality(_paused) = 0 or t.task_type <> all (_paused))
        order by t.task_id
        for update
    ), leases as (
        insert into queues.task_lease (task_id, worker_id, attempt, leased_at, expires_at)
        select p.task_id, _worker_id, p.attempt + 1, now(), now() + _lease_duration
        from picked p
        returning task_lease_id, task_id, attempt, expires_at
    ), upd as (
        update queues.task t
        set status = 'running',
            lease_id = l.task_lease_id,
            lease_expires_at = l.expires_at,
            worker_id = _worker_id,
            attempt = l.attempt,
            claimed_at = now()
        from leases l
        where t.task_id = l.task_id
        returning t.*
    ), ev as (
        insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt)
        select u.task_id, 'claimed', 'pending', 'running', u.lease_id, _worker_id, u.attempt
        from upd u
    )
    select u.* from upd u
    order by u.priority desc, u.run_at, u.task_id;
end $$;

-- The dispatcher's step: marks up to _limit due pending tasks as dispatched and returns their
-- ids in claim order (priority, then run_at, then task_id), for the caller to send. Two
-- dispatchers never mark one task in the same window: the rows are locked (SKIP LOCKED) and the
-- mark is re-checked under the lock.
--
-- Flow control: only the first W due tasks in claim order are considered, where W is twice the
-- concurrency of the live workers on _transport (their pool_size in queues.worker), at least
-- _min_window. Tasks dispatched and not yet claimed count against W, so the transport never
-- holds much more than the fleet can start, priority order holds for tasks enqueued later, and
-- a pass costs O(W) however long the backlog is.
--
-- Also rescues expired leases (as claim_tasks does): with a transport nobody may call
-- claim_tasks, and a rescued task is then undispatched (its lease changed) and dispatched again.
create function queues.dispatch_tasks(
    _transport text,
    _limit integer default 500,
    _min_window integer default 100,
    _task_types text[] default null)
returns setof bigint
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
set enable_sort = off set jit = off as $$
declare
    _paused text[];
    _window integer;
    _ids bigint[];
begin
    if _limit is null or _limit < 1 then
        raise exception 'dispatch_tasks: _limit must be at least 1, got %', _limit using errcode = 'invalid_parameter_value';
    end if;

    perform queues.rescue_expired_leases();

    _paused := array(select qp.task_type from queues.queue_pause qp);
    _window := greatest(coalesce(_min_window, 100),
                        2 * coalesce((select sum(w.pool_size) from queues.worker w where w.transport = _transport), 0))::integer;

    -- The window, in claim order; of it, the tasks not dispatched yet (at most _limit).
    select (array_agg(a.task_id order by a.ord) filter (where not a.dispatched))[1:_limit] into _ids
    from (
        select t.task_id,
               internal.is_dispatched(t.dispatched_at, t.dispatch_lease_id, t.lease_id) as dispatched,
               row_number() over (order by t.priority desc, t.run_at, t.task_id) as ord
        from queues.task t
        where t.status = 'pending'
          and t.run_at <= now()
          and (_task_types is null or t.task_type = any (_task_types))
          and (cardinality(_paused) = 0 or t.task_type <> all (_paused))
        order by t.priority desc, t.run_at, t.task_id
        limit _window
    ) a;
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

-- Clears the dispatch mark of tasks whose ids could not be sent, so they are dispatched again at
-- the next pass: a failed send leaves the task eligible. Tasks no longer pending are left alone.
-- Returns how many marks were cleared. (If this call fails too, the reclaimer clears the marks
-- after its window.)
create function queues.undispatch_tasks(_task_ids bigint[]) returns integer
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _n integer;
begin
    update queues.task t
    set dispatched_at = null
    where t.task_id = any (_task_ids) and t.status = 'pending' and t.dispatched_at is not null;
    get diagnostics _n = row_count;
    return _n;
end $$;

-- The reclaimer's step: walks task_dispatched_idx from the oldest mark, over the pending tasks
-- marked more than _older_than ago (at most _limit), and for each:
--   - due, not paused: marks it dispatched now and returns its id to be sent again. When the
--     mark was for the current attempt, its message was lost (or is stuck behind a dead
--     consumer): a 'redispatched' event records it.
--   - otherwise (scheduled later after a retry, or paused): clears the mark; the dispatcher sends
--     it when it is due, or resumed.
-- Tasks of other types than _task_types (NULL: all) are left to the workers that run them.
-- Returns the ids to send, in claim order.
create function queues.redispatch_stale(
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
               t.run_at <= now() and (cardinality(_paused) = 0 or t.task_type <> all (_paused)) as send
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

-- Privileges: the worker role calls the four queues functions; nothing is executable by PUBLIC.
revoke all on function
    internal.is_dispatched(timestamptz, bigint, bigint),
    queues.claim_tasks_by_id(text, bigint[], interval, text[]),
    queues.dispatch_tasks(text, integer, integer, text[]),
    queues.undispatch_tasks(bigint[]),
    queues.redispatch_stale(interval, integer, text[])
from public;
grant execute on function
    queues.claim_tasks_by_id(text, bigint[], interval, text[]),
    queues.dispatch_tasks(text, integer, integer, text[]),
    queues.undispatch_tasks(bigint[]),
    queues.redispatch_stale(interval, integer, text[])
to worker_service_user;
