-- One live definition per SQL function.
--
-- 1. The lease step. claim_tasks (0002, redefined in 0007) and claim_tasks_by_id (0008) each
--    carried their own copy of "lease these rows": the task_lease insert, the update to running
--    and the 'claimed' event. Both now choose and lock their rows and call internal.lease_tasks,
--    the one place that takes a lease.
-- 2. queues.release_worker_tasks: gives back every task a worker holds, by the worker's id.
-- 3. Operator tunables in a table. queues.retry_delay and queues.notify_coalesce_ms() were tuned
--    by replacing the function, which any later migration redefining it would silently undo.
--    They now read queues.settings; an operator changes a row, which no migration rewrites.
--
-- schema.sql, at the repository's root, holds every current definition after all migrations.

-- The lease step -----------------------------------------------------------------------------

-- Leases the given tasks to _worker_id for _lease_duration. The caller has chosen the tasks and
-- holds their rows locked (FOR UPDATE) in its transaction; ids that are not pending are skipped.
-- Each task gets a new lease (a queues.task_lease row, whose id is the fencing token, from the
-- table's own identity sequence), attempt + 1, and a 'claimed' event. Returns the leased tasks
-- in claim order: priority (higher first), then run_at, then task_id.
--
-- The task row is updated first, drawing its lease id from task_lease's sequence, and the lease
-- row is written from the updated row: one pass over the locked rows, as the single statement
-- the claims had before.
create function internal.lease_tasks(_worker_id text, _task_ids bigint[], _lease_duration interval)
returns setof queues.task
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    return query
    with upd as (
        update queues.task t
        set status = 'running',
            lease_id = nextval('queues.task_lease_task_lease_id_seq'::regclass),
            lease_expires_at = now() + _lease_duration,
            worker_id = _worker_id,
            attempt = t.attempt + 1,
            claimed_at = now()
        where t.task_id = any (_task_ids) and t.status = 'pending'
        returning t.*
    ), leases as (
        insert into queues.task_lease (task_lease_id, task_id, worker_id, attempt, leased_at, expires_at)
        overriding system value
        select u.lease_id, u.task_id, _worker_id, u.attempt, now(), u.lease_expires_at
        from upd u
    ), ev as (
        insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt)
        select u.task_id, 'claimed', 'pending', 'running', u.lease_id, _worker_id, u.attempt
        from upd u
    )
    select u.* from upd u
    order by u.priority desc, u.run_at, u.task_id;
end $$;

-- Claims up to _limit due tasks for a worker: priority (higher first), then run_at (the scheduled
-- time, moved by retries), then task_id; paused task types (queues.queue_pause) and types outside
-- _task_types (NULL: all) are left alone; rows locked by another claimer are skipped. Expired
-- leases are rescued first. The paused list is read once per call into an array: with nothing
-- paused the candidate query is a walk of task_claim_idx.
create or replace function queues.claim_tasks(
    _worker_id text,
    _limit integer,
    _lease_duration interval default interval '5 minutes',
    _task_types text[] default null)
returns setof queues.task
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _paused text[];
    _ids bigint[];
begin
    if _limit is null or _limit < 1 then
        raise exception 'claim_tasks: _limit must be at least 1, got %', _limit using errcode = 'invalid_parameter_value';
    end if;
    if _lease_duration is null or _lease_duration <= interval '0' then
        raise exception 'claim_tasks: _lease_duration must be positive, got %', _lease_duration
            using errcode = 'invalid_parameter_value';
    end if;

    perform queues.rescue_expired_leases();

    _paused := array(select qp.task_type from queues.queue_pause qp);

    _ids := array(
        select t.task_id
        from queues.task t
        where t.status = 'pending'
          and t.run_at <= now()
          and (_task_types is null or t.task_type = any (_task_types))
          and (cardinality(_paused) = 0 or t.task_type <> all (_paused))
        order by t.priority desc, t.run_at, t.task_id
        limit _limit
        for update skip locked);
    if cardinality(_ids) = 0 then
        return;
    end if;

    return query select * from internal.lease_tasks(_worker_id, _ids, _lease_duration);
end $$;

-- Claims the given tasks for a worker that received their ids from a transport: each one that
-- is pending, due, of a type the worker runs (_task_types, NULL: all) and not paused is leased as
-- claim_tasks leases. The others are not claimed: already claimed by another worker (a duplicate
-- message), finished, not due yet, paused, or unknown (pruned). Returns the claimed tasks in
-- claim order. Duplicate ids are claimed once. The dispatch mark (dispatched_at,
-- dispatch_lease_id) is left as it is: the new lease id alone makes the task undispatched again
-- when it comes back to pending.
--
-- Locks are waited for, not skipped: a pending row can be locked for a moment by a dispatcher
-- whose pass saw it undispatched in its snapshot (it locks, re-checks, and leaves it, but keeps
-- the lock until its statement ends). Skipping would refuse the one message that was sent for
-- the task and leave it to the reclaimer. The wait is short (every other locker of a pending
-- row is one short statement) and cannot deadlock: claims lock in task id order, and the other
-- multi-row lockers (claim_tasks, dispatch_tasks, redispatch_stale, rescue_expired_leases)
-- skip locked rows rather than wait. A row that is running in the claim's snapshot is not
-- locked at all. (enable_sort and jit off: see 0008, "Plans".)
create or replace function queues.claim_tasks_by_id(
    _worker_id text,
    _task_ids bigint[],
    _lease_duration interval default interval '5 minutes',
    _task_types text[] default null)
returns setof queues.task
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
set enable_sort = off set jit = off as $$
declare
    _paused text[];
    _ids bigint[];
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

    _ids := array(
        select t.task_id
        from queues.task t
        where t.task_id = any (_task_ids)
          and t.status = 'pending'
          and t.run_at <= now()
          and (_task_types is null or t.task_type = any (_task_types))
          and (cardinality(_paused) = 0 or t.task_type <> all (_paused))
        order by t.task_id
        for update);
    if cardinality(_ids) = 0 then
        return;
    end if;

    return query select * from internal.lease_tasks(_worker_id, _ids, _lease_duration);
end $$;

-- Releasing a worker's tasks -----------------------------------------------------------------

-- Gives back to pending, due now, every task running under a lease held by _worker_id, exactly
-- as queues.release_tasks does for the (task, lease) pairs it is given: the attempt is not spent
-- and each task gets a 'released' event. For a worker giving everything back at once, or an
-- operator freeing the tasks of a worker known to be gone without waiting for its leases to
-- expire. Returns the ids released.
--
-- The running tasks are found through task_lease_expiry_idx (partial: running tasks only), so
-- the cost follows the number of running tasks, never the finished history; a claim pays for no
-- further index. The pairs are then released by release_tasks, fenced by the lease: a task
-- finished or taken over meanwhile is left alone.
create function queues.release_worker_tasks(_worker_id text, _reason text default null)
returns setof bigint
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _ids bigint[];
    _leases bigint[];
begin
    select array_agg(t.task_id order by t.task_id), array_agg(t.lease_id order by t.task_id)
    into _ids, _leases
    from queues.task t
    where t.status = 'running' and t.worker_id = _worker_id;
    if _ids is null then
        return;
    end if;
    return query select r.id from queues.release_tasks(_ids, _leases, _reason) as r(id);
end $$;

-- Settings -------------------------------------------------------------------------------------

-- The operator's tunables: one row, one typed column per tunable. PostgreSQL checks each value's
-- type and range on UPDATE, and a reader is one primary key lookup. A later migration adds
-- a tunable with ALTER TABLE ... ADD COLUMN ... DEFAULT, which leaves the values already set
-- alone; no migration updates this row.
create table queues.settings (
    singleton          boolean     primary key default true,
    retry_backoff_base interval    not null default interval '1 second',
    retry_backoff_max  interval    not null default interval '1 hour',
    notify_coalesce_ms integer     not null default 0,
    updated_at         timestamptz not null default now(),
    updated_by         text        not null default session_user,
    constraint settings_one_row check (singleton),
    constraint settings_retry_backoff_base_valid check (retry_backoff_base >= interval '0'),
    constraint settings_retry_backoff_max_valid check (retry_backoff_max >= interval '0'),
    constraint settings_notify_coalesce_ms_valid check (notify_coalesce_ms between 0 and 3600000)
);

comment on table queues.settings is
    'Operator tunables, one row: change them with UPDATE (docs/sql.md, "Settings"). Migrations never rewrite the row.';
comment on column queues.settings.retry_backoff_base is
    'queues.retry_delay: the ceiling of the first retry''s delay, doubled per attempt (1 second).';
comment on column queues.settings.retry_backoff_max is
    'queues.retry_delay: the largest ceiling (1 hour). Delays are uniform below the ceiling (full jitter).';
comment on column queues.settings.notify_coalesce_ms is
    'queues.notify_coalesce_ms(): how long after a wake-up NOTIFY an enqueue may skip its own; 0 notifies every statement.';

-- Keeps the row: stamps updates, refuses DELETE and TRUNCATE (the readers need the row).
create function internal.guard_settings() returns trigger
language plpgsql set search_path = pg_catalog, pg_temp as $$
begin
    if tg_op = 'UPDATE' then
        new.updated_at := now();
        new.updated_by := session_user;
        return new;
    end if;
    raise exception 'queues.settings holds one row, which is updated, never deleted'
        using errcode = 'insufficient_privilege';
end $$;

create trigger settings_stamp before update on queues.settings
    for each row execute function internal.guard_settings();
create trigger settings_keep_row before delete or truncate on queues.settings
    for each statement execute function internal.guard_settings();

-- The row. A window set by replacing notify_coalesce_ms() (0012's way) is carried over.
insert into queues.settings (notify_coalesce_ms)
values (least(greatest(coalesce(queues.notify_coalesce_ms(), 0), 0), 3600000));

do $$
begin
    if (select regexp_replace(p.prosrc, '\s+', ' ', 'g') from pg_catalog.pg_proc p
        where p.oid = 'queues.retry_delay(integer)'::regprocedure)
       <> ' select make_interval(secs => random() * least(3600.0, power(2.0, least(greatest(_attempt, 1), 30)))) ' then
        raise warning 'queues.retry_delay(integer) had been replaced; it now reads queues.settings (retry_backoff_base, retry_backoff_max): set them to keep a policy of your own';
    end if;
end $$;

-- Delay before retry number _attempt+1 after attempt _attempt failed: exponential backoff with
-- full jitter, uniform in [0, min(retry_backoff_max, retry_backoff_base * 2^attempt)); with the
-- defaults [0, min(1 hour, 2^attempt seconds)). (PL/pgSQL, so the settings query is planned once
-- per session.)
create or replace function queues.retry_delay(_attempt integer) returns interval
language plpgsql volatile parallel safe as $$
begin
    return (select make_interval(secs => random() * least(extract(epoch from s.retry_backoff_max),
                                                         extract(epoch from s.retry_backoff_base)
                                                           * power(2.0, least(greatest(_attempt, 1), 30))))
            from queues.settings s where s.singleton);
end $$;

-- How long after a wake-up notification an enqueue may skip its own (0012): read by the enqueue
-- trigger once per inserting statement. A primary key lookup, planned once per session (in
-- PL/pgSQL; a SQL function's query would be planned again in every transaction): about 2.5 us.
create or replace function queues.notify_coalesce_ms() returns integer
language plpgsql stable parallel safe as $$
begin
    return (select s.notify_coalesce_ms from queues.settings s where s.singleton);
end $$;

-- Privileges -----------------------------------------------------------------------------------
-- The table is the owner's (grant UPDATE on it to an operator's role); the worker role calls
-- release_worker_tasks and nothing else new.
revoke all on table queues.settings from public;
revoke all on function
    internal.lease_tasks(text, bigint[], interval),
    internal.guard_settings(),
    queues.release_worker_tasks(text, text),
    queues.retry_delay(integer),
    queues.notify_coalesce_ms()
from public;
grant execute on function queues.release_worker_tasks(text, text) to worker_service_user;
