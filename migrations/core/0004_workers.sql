-- taskorch workers: the registry and its heartbeats, the leader lease, orphan recovery,
-- retention and periodic schedules (DESIGN §2 "Workers and leadership"; seeds 001 and 004).
--
-- Who calls what (docs/operations.md):
--   every worker  register_worker, heartbeat_worker (one UPDATE of one row per interval, nothing
--                 per task), deregister_worker, acquire_leadership (every LeaderTTL/3),
--                 resign_leadership
--   the leader    reap_dead_workers, prune_finished, due_schedules, enqueue_schedule_tick; each
--                 that writes takes the leader's term and does nothing under a stale one
--   operators     add_schedule, remove_schedule; reading queues.worker, queues.leader and
--                 queues.schedule
-- Liveness and leases use the database's clock (now()). Schedule ticks are cron times the leader
-- computes in Go; they name the task they enqueue, so clocks only decide when a tick fires.

-- Registry -----------------------------------------------------------------------------------

create table queues.worker (
    worker_id      text        primary key,                -- hostname-pid-random, made by the worker
    hostname       text        not null,
    pid            integer,
    started_at     timestamptz not null default now(),     -- registration (again after being reaped)
    last_heartbeat timestamptz not null default now(),
    pool_size      integer     not null default 0,         -- tasks it runs at once
    version        text,                                   -- taskorch version of the worker
    transport      text,                                   -- postgres, redis, sqs
    task_types     text[],                                 -- the types it claims; NULL: all
    constraint worker_id_valid check (length(worker_id) between 1 and 256),
    constraint worker_pool_size_valid check (pool_size >= 0)
);
comment on table queues.worker is
    'One row per live worker, kept alive by heartbeats; the leader deletes workers whose heartbeat is older than the worker timeout and recovers their tasks.';

-- A heartbeat changes last_heartbeat only. No index covers that column, so every heartbeat is a
-- HOT update (one heap page, no index entry), and the half-empty pages keep room for it. The
-- table has one row per worker: the reaper reads it whole, no index needed.
alter table queues.worker set (fillfactor = 50);

-- Leadership ---------------------------------------------------------------------------------

create table queues.leader (
    name       text        primary key default 'default',
    worker_id  text,                    -- the leader; NULL after it resigned
    term       bigint      not null,    -- +1 at every change of leader: the fencing token of leader actions
    elected_at timestamptz not null,
    expires_at timestamptz not null,    -- the lease: renewed by the leader, taken over by anyone once past
    constraint leader_term_positive check (term > 0)
);
comment on table queues.leader is
    'The leader lease (one row). term grows at every change of leader; leader actions carry it and are refused under a stale one.';

-- Schedules ----------------------------------------------------------------------------------

create table queues.schedule (
    name             text        primary key,
    cron             text        not null,          -- 5-field cron in UTC, or a descriptor (@hourly, @every 10m)
    task_type        text        not null,
    payload          jsonb       not null default '{}'::jsonb,
    priority         integer     not null default 0,
    max_attempts     integer,                       -- NULL: queues.default_max_attempts()
    enabled          boolean     not null default true,
    created_at       timestamptz not null default now(),
    updated_at       timestamptz not null default now(),
    next_run_at      timestamptz,                   -- the next tick to enqueue; NULL: the leader computes it
    last_tick_at     timestamptz,                   -- the tick of the last task enqueued
    last_enqueued_at timestamptz,                   -- when that task was enqueued
    last_task_id     bigint,
    constraint schedule_name_valid check (name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$' and length(name) <= 128),
    constraint schedule_cron_valid check (length(cron) between 1 and 256),
    constraint schedule_task_type_valid check (task_type ~ '^[A-Za-z][A-Za-z0-9_.:-]*$' and length(task_type) <= 128),
    constraint schedule_payload_is_object check (jsonb_typeof(payload) = 'object'),
    constraint schedule_max_attempts_positive check (max_attempts is null or max_attempts > 0)
);
comment on table queues.schedule is
    'Periodic tasks: the leader enqueues one task per cron tick, with idempotency key schedule:<name>:<tick in UTC RFC 3339>.';

-- Retention ----------------------------------------------------------------------------------

-- Finished tasks by status and finish time, for prune_finished. The finish time is the latest
-- transition timestamp: the current terminal state was entered last (a retried task's older
-- timestamps are earlier). Only tasks in a terminal state have an entry, so the hot path pays
-- one index insertion per task, when it finishes (the completion already inserts a new tuple
-- version into the primary key: changing the status never allows a HOT update); claims,
-- renewals and retries pay nothing. Measured: docs/operations.md, "Retention".
create index task_finished_idx
    on queues.task (status, (greatest(completed_at, cancelled_at, failed_at, dead_at)))
    where status in ('completed', 'cancelled', 'failed', 'dead');

-- Helpers ------------------------------------------------------------------------------------

-- True when _term is the current, unexpired leader term. Locks the leader row FOR SHARE until
-- the caller's transaction ends, so a change of leader (an UPDATE of that row) waits for a
-- leader action in progress: nothing done under term T commits after term T+1 has begun.
create function internal.holds_leader_term(_term bigint) returns boolean
language plpgsql volatile set search_path = pg_catalog, pg_temp as $$
begin
    perform
    from queues.leader l
    where l.name = 'default' and l.term = _term and l.worker_id is not null and l.expires_at > now()
    for share;
    return found;
end $$;

-- The idempotency key of a schedule's tick: schedule:<name>:<tick in UTC, RFC 3339, seconds>.
create function internal.schedule_tick_key(_name text, _tick timestamptz) returns text
language sql stable parallel safe set search_path = pg_catalog, pg_temp as $$
    select 'schedule:' || _name || ':' || to_char(_tick at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
$$;

-- Registry functions -------------------------------------------------------------------------

-- Registers a worker (or registers it again, after a reaper removed it): an upsert.
create function queues.register_worker(
    _worker_id text,
    _hostname text,
    _pid integer default null,
    _pool_size integer default 0,
    _version text default null,
    _transport text default null,
    _task_types text[] default null)
returns void
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _worker_id is null or length(_worker_id) not between 1 and 256 then
        raise exception 'register_worker: worker_id must be 1 to 256 characters' using errcode = 'invalid_parameter_value';
    end if;
    if _hostname is null then
        raise exception 'register_worker: hostname must not be NULL' using errcode = 'invalid_parameter_value';
    end if;
    if _pool_size is not null and _pool_size < 0 then
        raise exception 'register_worker: pool_size must not be negative, got %', _pool_size
            using errcode = 'invalid_parameter_value';
    end if;
    insert into queues.worker as w (worker_id, hostname, pid, pool_size, version, transport, task_types)
    values (_worker_id, _hostname, _pid, coalesce(_pool_size, 0), _version, _transport, _task_types)
    on conflict (worker_id) do update
    set hostname = excluded.hostname, pid = excluded.pid, pool_size = excluded.pool_size,
        version = excluded.version, transport = excluded.transport, task_types = excluded.task_types,
        started_at = now(), last_heartbeat = now();
end $$;

-- A worker's heartbeat: one UPDATE of its row. False when the row is gone (a leader reaped the
-- worker and recovered its tasks): the worker registers again, and its outcomes for the tasks
-- it held are refused, since their leases were recovered.
create function queues.heartbeat_worker(_worker_id text) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    update queues.worker set last_heartbeat = now() where worker_id = _worker_id;
    return found;
end $$;

-- Removes a worker at shutdown, and resigns its leadership if it held it. Tasks it still holds
-- (it should have finished or released them first) are rescued when their leases expire.
-- True when the worker was registered.
create function queues.deregister_worker(_worker_id text) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _found boolean;
begin
    delete from queues.worker where worker_id = _worker_id;
    _found := found;
    update queues.leader set worker_id = null, expires_at = now() where worker_id = _worker_id;
    return _found;
end $$;

-- Leadership functions -----------------------------------------------------------------------

-- Takes or renews the leader lease for _ttl. Returns the term when _worker_id is (now) the
-- leader, NULL when another worker holds an unexpired lease. One atomic conditional upsert: under
-- concurrent callers the row lock orders them, and each re-checks the condition on the row the
-- previous one left, so at most one wins. The term grows when the leader changes; a leader that
-- renews (even just after its lease lapsed, if nobody took it) keeps its term.
create function queues.acquire_leadership(_worker_id text, _ttl interval) returns bigint
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _term bigint;
begin
    if _worker_id is null or _worker_id = '' then
        raise exception 'acquire_leadership: worker_id must not be empty' using errcode = 'invalid_parameter_value';
    end if;
    if _ttl is null or _ttl <= interval '0' then
        raise exception 'acquire_leadership: ttl must be positive, got %', _ttl using errcode = 'invalid_parameter_value';
    end if;
    insert into queues.leader as l (name, worker_id, term, elected_at, expires_at)
    values ('default', _worker_id, 1, now(), now() + _ttl)
    on conflict (name) do update
    set term = case when l.worker_id = excluded.worker_id then l.term else l.term + 1 end,
        elected_at = case when l.worker_id = excluded.worker_id then l.elected_at else now() end,
        worker_id = excluded.worker_id,
        expires_at = excluded.expires_at
    where l.worker_id = excluded.worker_id or l.worker_id is null or l.expires_at <= now()
    returning l.term into _term;
    return _term;
end $$;

-- Gives up the lease now (a leader shutting down), so another worker takes over at its next try
-- instead of after the lease expires. True when _worker_id was the leader.
create function queues.resign_leadership(_worker_id text) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    update queues.leader set worker_id = null, expires_at = now()
    where name = 'default' and worker_id = _worker_id;
    return found;
end $$;

-- Leader actions -----------------------------------------------------------------------------

-- Orphan recovery. Deletes the workers whose last heartbeat is older than _timeout (never the
-- leader itself) and returns the tasks they were running to pending, or to dead when that was
-- their last attempt: like an expired lease (queues.rescue_expired_leases), the lost lease
-- counts as an attempt. Fenced: only tasks still running under the dead worker's lease; each
-- gets a 'recovered' event and a queues.error row naming the worker and its last heartbeat, so
-- the worker's late outcome under that lease is refused. Rows locked by someone else are
-- skipped (their lease expiry rescues them). Returns one row per worker removed; none when
-- _term is not the current leader term (a deposed leader does nothing).
create function queues.reap_dead_workers(_timeout interval, _term bigint)
returns table (worker_id text, last_heartbeat timestamptz, tasks_recovered integer, tasks_dead integer)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
-- Plans for the values of this call: a generic plan guesses the batch size and could pick
-- sequential scans of the task table.
set plan_cache_mode = force_custom_plan as $$
#variable_conflict use_column
declare
    _leader text;
begin
    if _timeout is null or _timeout <= interval '0' then
        raise exception 'reap_dead_workers: timeout must be positive, got %', _timeout
            using errcode = 'invalid_parameter_value';
    end if;
    if not internal.holds_leader_term(_term) then
        return;
    end if;
    select l.worker_id into _leader from queues.leader l where l.name = 'default';

    return query
    with dead as materialized (
        select w.worker_id, w.last_heartbeat
        from queues.worker w
        where w.last_heartbeat < now() - _timeout
          and w.worker_id <> _leader
        for update skip locked
    ), picked as (
        -- The running tasks: a scan of the partial index of running tasks, which is small.
        select t.task_id, d.last_heartbeat
        from queues.task t
        join dead d on d.worker_id = t.worker_id
        where t.status = 'running' and t.lease_expires_at is not null
        for update of t skip locked
    ), upd as (
        update queues.task t
        set status = case when t.attempt >= t.max_attempts then 'dead'::queues.task_status else 'pending' end,
            dead_at = case when t.attempt >= t.max_attempts then now() else t.dead_at end,
            run_at = case when t.attempt >= t.max_attempts then t.run_at else now() end,
            lease_expires_at = null,
            last_error = format('worker %s stopped heartbeating (last heartbeat %s, timeout %s): lease %s recovered, attempt %s of %s',
                                t.worker_id, p.last_heartbeat, _timeout, t.lease_id, t.attempt, t.max_attempts)
        from picked p
        where t.task_id = p.task_id
        returning t.task_id, t.status, t.lease_id, t.worker_id, t.attempt, t.max_attempts, t.last_error, p.last_heartbeat
    ), ev as (
        insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
        select u.task_id, 'recovered', 'running', u.status, u.lease_id, u.worker_id, u.attempt, u.last_error
        from upd u
    ), err as (
        insert into queues.error (task_id, error_message, context)
        select u.task_id, u.last_error,
               jsonb_build_object('operation', 'recovered', 'worker_id', u.worker_id,
                                  'last_heartbeat', u.last_heartbeat, 'worker_timeout', _timeout::text,
                                  'lease_id', u.lease_id, 'attempt', u.attempt,
                                  'max_attempts', u.max_attempts, 'outcome', u.status, 'term', _term)
        from upd u
    ), gone as (
        delete from queues.worker w
        using dead d
        where w.worker_id = d.worker_id
        returning w.worker_id, w.last_heartbeat
    )
    select g.worker_id, g.last_heartbeat,
           count(u.task_id)::integer,
           (count(u.task_id) filter (where u.status = 'dead'))::integer
    from gone g
    left join upd u on u.worker_id = g.worker_id
    group by g.worker_id, g.last_heartbeat
    order by g.worker_id;
end $$;

-- Retention. Deletes up to _limit tasks in one of _statuses (finished statuses only) that
-- finished more than _older_than ago, with their task_lease, task_event and error rows. Call it
-- again while it returns _limit: each call is one short transaction. Returns the number of tasks
-- deleted; NULL when _term is not the current leader term (nothing is deleted).
create function queues.prune_finished(
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
    -- from its oldest entry for that status and stop after _limit rows. (Without it, a guessed
    -- selectivity for the finish time, the same for every table, can make it prefer a sequential
    -- scan, which at steady state — a minute's worth of prunable tasks among days of retained
    -- ones — would read most of the table to find a batch.)
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
    -- History goes with its task, found through each table's task_id index.
    delete from queues.task_lease where task_id = any (_ids);
    delete from queues.task_event where task_id = any (_ids);
    delete from queues.error where task_id = any (_ids);
    return cardinality(_ids);
end $$;

-- Schedule functions -------------------------------------------------------------------------

-- Adds a schedule, or replaces the definition of the one with that name. _next_run_at is the
-- first tick to enqueue; NULL lets the leader compute it (the next tick after it sees the
-- schedule). A replacement keeps its next_run_at unless the cron expression changed or the
-- schedule is being enabled again. The cron expression is checked for shape here (5 fields, or
-- a descriptor such as @hourly) and parsed by the leader, which skips and logs one it cannot
-- parse; `taskorch` and the Go API parse it before calling this. Returns true when created.
create function queues.add_schedule(
    _name text,
    _cron text,
    _task_type text,
    _payload jsonb default '{}'::jsonb,
    _priority integer default 0,
    _max_attempts integer default null,
    _enabled boolean default true,
    _next_run_at timestamptz default null)
returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _fields text[];
    _created boolean;
begin
    if _name is null or _name !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$' or length(_name) > 128 then
        raise exception 'add_schedule: name % is malformed: use 1 to 128 letters, digits, "_", ".", ":" or "-", starting with a letter or digit',
            coalesce(quote_literal(left(_name, 140)), 'NULL') using errcode = 'invalid_parameter_value';
    end if;
    perform internal.check_task_input(_task_type, coalesce(_payload, '{}'::jsonb), _max_attempts, null, 'add_schedule');
    _fields := regexp_split_to_array(
        regexp_replace(btrim(coalesce(_cron, '')), '^(CRON_TZ|TZ)=\S+\s+', ''), '\s+');
    if length(_cron) > 256
       or not (_fields[1] ~ '^@[a-z]' and cardinality(_fields) <= 2
               or cardinality(_fields) = 5 and not exists (
                   select from unnest(_fields) f where f !~ '^[0-9A-Za-z*?,/-]+$')) then
        raise exception 'add_schedule: cron % is malformed: want 5 fields (minute hour day-of-month month day-of-week) or a descriptor such as @hourly',
            coalesce(quote_literal(left(_cron, 260)), 'NULL') using errcode = 'invalid_parameter_value';
    end if;

    insert into queues.schedule as s (name, cron, task_type, payload, priority, max_attempts, enabled, next_run_at)
    values (_name, btrim(_cron), _task_type, coalesce(_payload, '{}'::jsonb), coalesce(_priority, 0), _max_attempts,
            coalesce(_enabled, true), _next_run_at)
    on conflict (name) do update
    set next_run_at = case when s.cron <> excluded.cron or (excluded.enabled and not s.enabled)
                           then excluded.next_run_at else s.next_run_at end,
        cron = excluded.cron, task_type = excluded.task_type, payload = excluded.payload,
        priority = excluded.priority, max_attempts = excluded.max_attempts, enabled = excluded.enabled,
        updated_at = now()
    returning (xmax = 0) into _created;
    return _created;
end $$;

-- Removes a schedule. Tasks it enqueued stay. True when it existed.
create function queues.remove_schedule(_name text) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    delete from queues.schedule where name = _name;
    return found;
end $$;

-- The enabled schedules with a tick due at _now (next_run_at <= _now), and those whose
-- next_run_at the leader has yet to compute. Read by the leader every ScheduleInterval.
create function queues.due_schedules(_now timestamptz)
returns table (name text, cron text, next_run_at timestamptz)
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select s.name, s.cron, s.next_run_at
    from queues.schedule s
    where s.enabled and (s.next_run_at is null or s.next_run_at <= _now)
    order by s.next_run_at nulls first, s.name
$$;

-- The leader's step for one schedule, in one transaction: enqueues the task of tick _tick (NULL:
-- none, only set next_run_at) with the idempotency key schedule:<name>:<tick in UTC RFC 3339>,
-- so a tick is enqueued once however many leaders overlap, and moves next_run_at to
-- _next_run_at (never backwards). Returns the task id (an existing one for a tick enqueued
-- before); NULL when nothing was enqueued: no tick, _term is not the current leader term, or
-- the schedule was removed, disabled or given another cron expression (_cron is the one the
-- leader computed with) meanwhile.
create function queues.enqueue_schedule_tick(
    _name text,
    _cron text,
    _tick timestamptz,
    _next_run_at timestamptz,
    _term bigint)
returns bigint
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _s queues.schedule;
    _id bigint;
begin
    if not internal.holds_leader_term(_term) then
        return null;
    end if;
    select * into _s from queues.schedule where name = _name for update;
    if not found or not _s.enabled or _s.cron is distinct from _cron then
        return null;
    end if;
    if _tick is not null then
        _id := queues.enqueue(_s.task_type, _s.payload, _tick, _s.priority,
                              internal.schedule_tick_key(_s.name, _tick), _s.max_attempts);
    end if;
    update queues.schedule
    set next_run_at = greatest(next_run_at, _next_run_at),
        last_tick_at = case when _id is null then last_tick_at else _tick end,
        last_enqueued_at = case when _id is null then last_enqueued_at else now() end,
        last_task_id = coalesce(_id, last_task_id)
    where name = _name;
    return _id;
end $$;

-- Privileges ---------------------------------------------------------------------------------
-- Nothing here is executable by PUBLIC and no table is granted to anyone; the worker role gets
-- exactly the functions a worker and a leader call. Operators call add_schedule and
-- remove_schedule and read the tables (docs/security.md).
revoke all on table queues.worker, queues.leader, queues.schedule from public;
revoke all on function
    internal.holds_leader_term(bigint),
    internal.schedule_tick_key(text, timestamptz),
    queues.register_worker(text, text, integer, integer, text, text, text[]),
    queues.heartbeat_worker(text),
    queues.deregister_worker(text),
    queues.acquire_leadership(text, interval),
    queues.resign_leadership(text),
    queues.reap_dead_workers(interval, bigint),
    queues.prune_finished(interval, integer, bigint, queues.task_status[]),
    queues.add_schedule(text, text, text, jsonb, integer, integer, boolean, timestamptz),
    queues.remove_schedule(text),
    queues.due_schedules(timestamptz),
    queues.enqueue_schedule_tick(text, text, timestamptz, timestamptz, bigint)
from public;

grant execute on function
    queues.register_worker(text, text, integer, integer, text, text, text[]),
    queues.heartbeat_worker(text),
    queues.deregister_worker(text),
    queues.acquire_leadership(text, interval),
    queues.resign_leadership(text),
    queues.reap_dead_workers(interval, bigint),
    queues.prune_finished(interval, integer, bigint, queues.task_status[]),
    queues.due_schedules(timestamptz),
    queues.enqueue_schedule_tick(text, text, timestamptz, timestamptz, bigint)
to worker_service_user;
