-- A crashed worker is found by the death of its database session, not by the silence of its
-- heartbeats (docs/operations.md, "Crashed workers"; docs/guarantees.md).
--
-- Each worker holds one connection of its own for its life (its session), and on it a
-- session-level advisory lock (class internal.worker_session_class(), key session_key) that it
-- takes when it registers. PostgreSQL releases the lock the moment the session ends, whichever
-- way it ends: the process was killed (its sockets close), the machine rebooted (the server's
-- keepalive finds it), the connection was cut. So whether a worker lives is one probe of its
-- lock: internal.worker_session_state. The leader runs queues.reap_lost_sessions every 250 ms
-- (one statement, no write while every session is alive): a worker whose session has been gone
-- for the grace (1 s by default) loses its running tasks, recovered as the heartbeat reaper
-- recovers them — fenced by their lease ids, so the worker's late outcome is refused. The grace
-- lets a live worker whose connection merely dropped take its lock again (register on a new
-- session) and keep its tasks. Followers try queues.acquire_leadership every 500 ms: it takes
-- the lease at once from a leader whose session is gone.
--
-- Where sessions cannot tell, heartbeats still decide (queues.reap_dead_workers, unchanged
-- apart from the cause it records): a worker without a session (PollOnly, behind a transaction
-- pooler: session_key is NULL), a stopped (SIGSTOP) or partitioned worker whose session the
-- server still holds, and the rows registered before PostgreSQL restarted or failed over
-- (session_epoch: the lock they name is another server's), until their workers register again.
--
-- Also here: a worker id is registered by one process at a time. queues.register_worker_instance
-- names the process (instance): a new process under the id of one that is gone takes over and
-- recovers its tasks at once; while that one lives it is refused (55006). Leadership is for a
-- registered, live worker and for at most an hour at a time; a claim needs a worker id.

-- The registry ---------------------------------------------------------------------------------

alter table queues.worker
    add column instance text,
    add column session_key integer,
    add column session_pid integer,
    add column session_epoch timestamptz,
    add column session_lost_at timestamptz,
    add constraint worker_instance_valid check (length(instance) between 1 and 128),
    add constraint worker_session_complete
        check ((session_key is null) = (session_pid is null) and (session_key is null) = (session_epoch is null)),
    add constraint worker_session_lost_has_session check (session_lost_at is null or session_key is not null);

comment on column queues.worker.instance is
    'The worker process that registered the id (random, one per process); NULL when registered with queues.register_worker.';
comment on column queues.worker.session_key is
    'The advisory lock (internal.worker_session_class(), session_key) the worker''s session holds while it lives; NULL: no session, heartbeats alone tell.';
comment on column queues.worker.session_pid is
    'The backend pid of the worker''s session (pg_stat_activity.pid).';
comment on column queues.worker.session_epoch is
    'pg_postmaster_start_time() when the session registered: the lock is only meaningful on that server.';
comment on column queues.worker.session_lost_at is
    'When the leader first found the worker''s session gone; its tasks are recovered once this is older than the grace.';
comment on table queues.worker is
    'One row per live worker. A worker with a session (session_key) is dead once its session is gone; one without, once its heartbeat is older than the worker timeout. The leader deletes dead workers and recovers their tasks.';

create sequence queues.worker_session_key_seq as integer minvalue 1 cycle;

-- The class of the workers' session locks (the first key of pg_advisory_lock(int, int)):
-- 'task' in ASCII. The second key is queues.worker.session_key.
create function internal.worker_session_class() returns integer
language sql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
    select 1952543595
$$;

-- What a worker's row says of its session: 'none' when it has none on this server (no session,
-- or one registered before PostgreSQL restarted or failed over), 'alive' while a session holds
-- its lock, 'gone' once none does. The probe is a shared try-lock, held to the end of the
-- transaction when it succeeds (nobody else wants it: keys are never reused while held) and
-- never waiting. It must not run on the worker's own session, whose lock never conflicts with
-- itself.
create function internal.worker_session_state(_session_key integer, _session_epoch timestamptz) returns text
language sql volatile set search_path = pg_catalog, pg_temp as $$
    select case
        when _session_key is null or _session_epoch is distinct from pg_postmaster_start_time() then 'none'
        when pg_try_advisory_xact_lock_shared(internal.worker_session_class(), _session_key) then 'gone'
        else 'alive'
    end
$$;

-- Recovers the running tasks of the given workers, fenced by their leases, as the heartbeat
-- reaper does: back to pending, or to dead when that was their last attempt (the lost lease
-- counts as an attempt, so a task that kills its worker every time ends dead). Each gets a
-- 'recovered' event and a queues.error row: _detail is a format() string given the worker id,
-- the lease id, the attempt and the attempts allowed (%1$s to %4$s); _context is merged into
-- the error row's context. Rows locked by someone else are skipped. Wakes the workers when a
-- task went back to pending.
create function internal.recover_worker_tasks(_worker_ids text[], _detail text, _context jsonb)
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
        returning t.task_id, t.status, t.lease_id, t.worker_id, t.attempt, t.max_attempts, t.last_error
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

-- Registration -----------------------------------------------------------------------------------

-- Registers a worker process (_instance: random, one per process) under _worker_id. With
-- _session, the calling connection becomes the worker's session: it takes the session lock and
-- its death will tell the worker's. Call it again (same instance) after the session was lost or
-- the worker was reaped: it keeps its tasks.
--
-- A row of another process under the same id: while that process lives (its session is alive,
-- or, without a session, its heartbeat is younger than _worker_timeout) the registration is
-- refused (55006, object_in_use), and the caller tries again later; once it is gone, this one
-- takes over: the previous process's running tasks are recovered at once (fenced, the attempt
-- counts) and its leadership, if any, ends. Returns the session key (NULL without a session)
-- and the number of tasks recovered.
create function queues.register_worker_instance(
    _worker_id text,
    _instance text,
    _hostname text,
    _pid integer,
    _pool_size integer,
    _version text,
    _transport text,
    _task_types text[],
    _session boolean,
    _worker_timeout interval)
returns table (session_key integer, tasks_recovered integer)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    _old queues.worker;
    _state text;
    _key integer;
    _recovered integer := 0;
    _inserted bigint := 0;
begin
    if _worker_id is null or btrim(_worker_id) = '' or length(_worker_id) > 256 then
        raise exception 'register_worker_instance: _worker_id must be 1 to 256 characters, not blank'
            using errcode = 'invalid_parameter_value';
    end if;
    if _instance is null or btrim(_instance) = '' or length(_instance) > 128 then
        raise exception 'register_worker_instance: _instance must be 1 to 128 characters, not blank'
            using errcode = 'invalid_parameter_value';
    end if;
    if _hostname is null then
        raise exception 'register_worker_instance: _hostname must not be NULL' using errcode = 'invalid_parameter_value';
    end if;
    if _pool_size is not null and _pool_size < 0 then
        raise exception 'register_worker_instance: _pool_size must not be negative, got %', _pool_size
            using errcode = 'invalid_parameter_value';
    end if;
    if _session is null then
        raise exception 'register_worker_instance: _session must not be NULL' using errcode = 'invalid_parameter_value';
    end if;
    if _worker_timeout is null or _worker_timeout <= interval '0' or _worker_timeout > interval '1 day' then
        raise exception 'register_worker_instance: _worker_timeout must be positive and at most a day, got %', _worker_timeout
            using errcode = 'invalid_parameter_value';
    end if;

    -- The row, locked; or a new one, which a concurrent registration of the same id may have
    -- inserted first (then it is read and locked on the second round).
    for _round in 1 .. 3 loop
        select * into _old from queues.worker w where w.worker_id = _worker_id for update;
        exit when found;
        insert into queues.worker as w (worker_id, hostname, pid, pool_size, version, transport, task_types, instance)
        values (_worker_id, _hostname, _pid, coalesce(_pool_size, 0), _version, _transport, _task_types, _instance)
        on conflict (worker_id) do nothing;
        get diagnostics _inserted = row_count;
        if _inserted > 0 then
            select * into _old from queues.worker w where w.worker_id = _worker_id;
            exit;
        end if;
    end loop;
    if _old.worker_id is null then
        raise exception 'register_worker_instance: worker id % is being registered and deregistered concurrently', _worker_id
            using errcode = 'serialization_failure';
    end if;

    if _old.instance is distinct from _instance then
        -- Another process registered this id. While it lives, refuse; once gone, take over.
        _state := internal.worker_session_state(_old.session_key, _old.session_epoch);
        if _state = 'alive' or (_state = 'none' and _old.last_heartbeat > now() - _worker_timeout) then
            raise exception 'register_worker_instance: worker id % is in use by a live worker (hostname %, pid %, registered %, %)',
                _worker_id, _old.hostname, _old.pid, _old.started_at,
                case when _state = 'alive' then 'its session ' || _old.session_pid || ' is alive'
                     else 'last heartbeat ' || _old.last_heartbeat end
                using errcode = 'object_in_use',
                      hint = 'Give each running worker its own id; a restarted worker takes over its id once the previous process is gone.';
        end if;
        select count(*)::integer into _recovered
        from internal.recover_worker_tasks(array[_worker_id],
            'worker %1$s registered again as a new process; the previous one is gone: lease %2$s recovered, attempt %3$s of %4$s',
            jsonb_build_object('cause', 'worker_restarted', 'previous_instance', _old.instance,
                               'previous_hostname', _old.hostname, 'previous_pid', _old.pid,
                               'previous_session', _state));
        update queues.leader set worker_id = null, expires_at = now() where worker_id = _worker_id;
    end if;

    if _session then
        _key := nextval('queues.worker_session_key_seq');
        if not pg_try_advisory_lock(internal.worker_session_class(), _key) then
            raise exception 'register_worker_instance: session lock % is held by another session', _key
                using errcode = 'object_in_use';
        end if;
    end if;

    update queues.worker w
    set hostname = _hostname, pid = _pid, pool_size = coalesce(_pool_size, 0), version = _version,
        transport = _transport, task_types = _task_types,
        started_at = case when w.instance is not distinct from _instance and _inserted = 0 then w.started_at else now() end,
        last_heartbeat = now(),
        instance = _instance,
        session_key = _key,
        session_pid = case when _session then pg_backend_pid() end,
        session_epoch = case when _session then pg_postmaster_start_time() end,
        session_lost_at = null
    where w.worker_id = _worker_id;

    return query select _key, _recovered;
end $$;

-- The registration of queues.register_worker_instance without a process or a session (tools,
-- tests, workers of older versions). It does not replace a row a worker process registered.
create or replace function queues.register_worker(
    _worker_id text,
    _hostname text,
    _pid integer default null,
    _pool_size integer default 0,
    _version text default null,
    _transport text default null,
    _task_types text[] default null)
returns void
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _instance text;
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
    select w.instance into _instance from queues.worker w where w.worker_id = _worker_id;
    if _instance is not null then
        raise exception 'register_worker: worker id % is registered by a worker process (queues.register_worker_instance)', _worker_id
            using errcode = 'object_in_use';
    end if;
    insert into queues.worker as w (worker_id, hostname, pid, pool_size, version, transport, task_types)
    values (_worker_id, _hostname, _pid, coalesce(_pool_size, 0), _version, _transport, _task_types)
    on conflict (worker_id) do update
    set hostname = excluded.hostname, pid = excluded.pid, pool_size = excluded.pool_size,
        version = excluded.version, transport = excluded.transport, task_types = excluded.task_types,
        started_at = now(), last_heartbeat = now(),
        instance = null, session_key = null, session_pid = null, session_epoch = null, session_lost_at = null;
end $$;

-- A heartbeat of one worker process: false when its row is gone (reaped) or another process
-- took its id over.
create function queues.heartbeat_worker(_worker_id text, _instance text) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    update queues.worker set last_heartbeat = now() where worker_id = _worker_id and instance = _instance;
    return found;
end $$;

-- Deregisters one worker process at shutdown (and ends its leadership): nothing when another
-- process took its id over. True when its row was deleted.
create function queues.deregister_worker(_worker_id text, _instance text) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    delete from queues.worker where worker_id = _worker_id and instance = _instance;
    if not found then
        return false;
    end if;
    update queues.leader set worker_id = null, expires_at = now() where worker_id = _worker_id;
    return true;
end $$;

-- Leadership -------------------------------------------------------------------------------------

-- Takes or renews the leader lease for _ttl (at most an hour) and returns the term, or NULL
-- when another worker holds it. Only a registered, live worker leads: its row exists (for
-- _instance, when given) and its session, if it has one on this server, is alive; otherwise
-- NULL. The lease is free when nobody holds it, it expired, or its holder is gone: no longer
-- registered, or its session is gone (then the holder's tasks' grace starts now). Followers call
-- it often: while the leader lives it only reads.
create function queues.acquire_leadership(_worker_id text, _ttl interval, _instance text) returns bigint
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _me queues.worker;
    _held queues.leader;
    _holder queues.worker;
    _holder_gone boolean := false;
    _term bigint;
begin
    if _worker_id is null or btrim(_worker_id) = '' then
        raise exception 'acquire_leadership: _worker_id must not be empty' using errcode = 'invalid_parameter_value';
    end if;
    if _ttl is null or _ttl <= interval '0' or _ttl > interval '1 hour' then
        raise exception 'acquire_leadership: _ttl must be positive and at most 1 hour, got %', _ttl
            using errcode = 'invalid_parameter_value';
    end if;
    -- A follower's call while the leader lives ends here, having read two rows.
    select * into _held from queues.leader l where l.name = 'default';
    if found and _held.worker_id is not null and _held.worker_id <> _worker_id and _held.expires_at > now() then
        select * into _holder from queues.worker w where w.worker_id = _held.worker_id;
        if found and internal.worker_session_state(_holder.session_key, _holder.session_epoch) <> 'gone' then
            return null;
        end if;
        _holder_gone := true;
    end if;
    select * into _me from queues.worker w where w.worker_id = _worker_id;
    if not found or (_instance is not null and _me.instance is distinct from _instance)
       or internal.worker_session_state(_me.session_key, _me.session_epoch) = 'gone' then
        return null;
    end if;

    -- Under the row's lock the condition is checked again: another worker may have moved first.
    insert into queues.leader as l (name, worker_id, term, elected_at, expires_at)
    values ('default', _worker_id, 1, now(), now() + _ttl)
    on conflict (name) do update
    set term = case when l.worker_id = excluded.worker_id then l.term else l.term + 1 end,
        elected_at = case when l.worker_id = excluded.worker_id then l.elected_at else now() end,
        worker_id = excluded.worker_id,
        expires_at = excluded.expires_at
    where l.worker_id = excluded.worker_id or l.worker_id is null or l.expires_at <= now()
       or (_holder_gone and l.worker_id = _held.worker_id and l.term = _held.term)
    returning l.term into _term;
    if _term is not null and _holder_gone then
        update queues.worker w set session_lost_at = now()
        where w.worker_id = _held.worker_id and w.session_key is not null and w.session_lost_at is null;
    end if;
    return _term;
end $$;

-- queues.acquire_leadership for any process of _worker_id (workers of older versions, tools).
create or replace function queues.acquire_leadership(_worker_id text, _ttl interval) returns bigint
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    select queues.acquire_leadership(_worker_id, _ttl, null)
$$;

-- Leader actions ---------------------------------------------------------------------------------

-- The session path of orphan recovery, run by the leader every 250 ms. Finds the workers whose
-- session is gone (never the leader itself), marks when it first saw each gone
-- (session_lost_at), and once that is older than _grace recovers their running tasks
-- (internal.recover_worker_tasks) and deletes them; a worker whose tasks could not all be
-- locked is kept, for the next call. Nothing while the leader's own session is gone: when the
-- connections of everyone were cut (a proxy restarted, the network flapped), what the leader
-- sees says nothing until it is back, and the others get the grace from then. Returns one row
-- per worker whose tasks were recovered; none when _term is not the current leader term, and no
-- write at all while every session is alive.
create function queues.reap_lost_sessions(_grace interval, _term bigint)
returns table (worker_id text, session_lost_at timestamptz, tasks_recovered integer, tasks_dead integer)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    _leader queues.worker;
    _gone text[];
    _due text[] := '{}';
    _w record;
    _ids text[];
    _statuses queues.task_status[];
begin
    if _grace is null or _grace < interval '0' or _grace > interval '1 hour' then
        raise exception 'reap_lost_sessions: _grace must be between 0 and 1 hour, got %', _grace
            using errcode = 'invalid_parameter_value';
    end if;
    -- Reads first: while every session lives (nearly always) the call ends here, having taken
    -- no row lock, so no transaction id and no WAL flush at its commit.
    select w.* into _leader
    from queues.leader l join queues.worker w on w.worker_id = l.worker_id
    where l.name = 'default' and l.term = _term;
    if not found or internal.worker_session_state(_leader.session_key, _leader.session_epoch) = 'gone' then
        return;
    end if;
    _gone := array(
        select w.worker_id from queues.worker w
        where w.worker_id <> _leader.worker_id and w.session_key is not null
          and internal.worker_session_state(w.session_key, w.session_epoch) = 'gone');
    if cardinality(_gone) = 0 or not internal.holds_leader_term(_term) then
        return;
    end if;

    for _w in
        select w.worker_id, w.session_key, w.session_epoch, w.session_lost_at
        from queues.worker w
        where w.worker_id = any (_gone)
        for update skip locked
    loop
        -- Locked now: it may have registered a new session meanwhile.
        continue when internal.worker_session_state(_w.session_key, _w.session_epoch) <> 'gone';
        if _w.session_lost_at is null then
            update queues.worker w set session_lost_at = now() where w.worker_id = _w.worker_id;
            _w.session_lost_at := now();
        end if;
        if _w.session_lost_at <= now() - _grace then
            _due := _due || _w.worker_id;
        end if;
    end loop;
    if cardinality(_due) = 0 then
        return;
    end if;

    select coalesce(array_agg(r.worker_id), '{}'), coalesce(array_agg(r.status), '{}')
    into _ids, _statuses
    from internal.recover_worker_tasks(_due,
        'worker %1$s lost its database session: lease %2$s recovered, attempt %3$s of %4$s',
        jsonb_build_object('cause', 'session_lost', 'term', _term, 'grace', _grace::text)) r;

    return query
    with gone as (
        delete from queues.worker w
        where w.worker_id = any (_due)
          and not exists (select from queues.task t
                          where t.worker_id = w.worker_id and t.status = 'running' and t.lease_expires_at is not null)
        returning w.worker_id, w.session_lost_at
    ), counted as (
        select d.worker_id,
               count(*) filter (where r.worker_id is not null)::integer as recovered,
               count(*) filter (where r.status = 'dead')::integer as dead
        from unnest(_due) as d(worker_id)
        left join unnest(_ids, _statuses) as r(worker_id, status) on r.worker_id = d.worker_id
        group by d.worker_id
    )
    select c.worker_id, w.session_lost_at, c.recovered, c.dead
    from counted c
    left join queues.worker w on w.worker_id = c.worker_id
    left join gone g on g.worker_id = c.worker_id
    where c.recovered > 0 or g.worker_id is not null
    order by c.worker_id;
end $$;

-- The heartbeat path of orphan recovery, as in core/0004, with the cause in the error rows'
-- context ('heartbeat_timeout'; the session path records 'session_lost', a takeover
-- 'worker_restarted'). It applies to every worker, with a session or not: a stopped or
-- partitioned worker keeps its session alive, and only its silence tells.
create or replace function queues.reap_dead_workers(_timeout interval, _term bigint)
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
               jsonb_build_object('operation', 'recovered', 'cause', 'heartbeat_timeout', 'worker_id', u.worker_id,
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

-- Claims and releases name a worker ------------------------------------------------------------

-- As in core/0032 (with core/0033's cached plan), and a claim needs a worker id: a task leased
-- to none could be found by no release and no recovery, only by its lease's expiry. (A claim
-- for an id that is not registered — queues.dequeue_next_available_task's 'sql:<role>', a
-- tool — is fine: its tasks come back when their lease expires.)
create or replace function internal.lease_tasks(_worker_id text, _task_ids bigint[], _lease_duration interval)
returns setof queues.task
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan as $$
begin
    if _worker_id is null or btrim(_worker_id) = '' then
        raise exception 'claim: _worker_id must name the claiming worker, got %', coalesce(quote_literal(_worker_id), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    return query
    with upd as (
        update queues.task t
        set status = 'running',
            lease_id = nextval('queues.task_lease_task_lease_id_seq'::regclass),
            lease_expires_at = now() + _lease_duration,
            worker_id = _worker_id,
            attempt = t.attempt + 1,
            claimed_at = now(),
            debounce_key = null
        where t.task_id = any (_task_ids) and t.status = 'pending'
        returning t.*
    ), leases as (
        insert into queues.task_lease (task_lease_id, task_id, worker_id, attempt, leased_at, expires_at)
        overriding system value
        select u.lease_id, u.task_id, _worker_id, u.attempt, now(), u.lease_expires_at
        from upd u
    )
    select u.* from upd u
    order by u.priority desc, u.run_at, u.task_id;
end $$;

create or replace function queues.release_worker_tasks(_worker_id text, _reason text default null)
returns setof bigint
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _ids bigint[];
    _leases bigint[];
begin
    if _worker_id is null or btrim(_worker_id) = '' then
        raise exception 'release_worker_tasks: _worker_id must name a worker, got %', coalesce(quote_literal(_worker_id), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    select array_agg(t.task_id order by t.task_id), array_agg(t.lease_id order by t.task_id)
    into _ids, _leases
    from queues.task t
    where t.status = 'running' and t.worker_id = _worker_id;
    if _ids is null then
        return;
    end if;
    return query select r.id from queues.release_tasks(_ids, _leases, _reason) as r(id);
end $$;

-- Privileges -------------------------------------------------------------------------------------
revoke all on sequence queues.worker_session_key_seq from public;
revoke all on function
    internal.worker_session_class(),
    internal.worker_session_state(integer, timestamptz),
    internal.recover_worker_tasks(text[], text, jsonb),
    queues.register_worker_instance(text, text, text, integer, integer, text, text, text[], boolean, interval),
    queues.heartbeat_worker(text, text),
    queues.deregister_worker(text, text),
    queues.acquire_leadership(text, interval, text),
    queues.reap_lost_sessions(interval, bigint)
from public;
grant execute on function
    queues.register_worker_instance(text, text, text, integer, integer, text, text, text[], boolean, interval),
    queues.heartbeat_worker(text, text),
    queues.deregister_worker(text, text),
    queues.acquire_leadership(text, interval, text),
    queues.reap_lost_sessions(interval, bigint)
to worker_service_user;
