-- Long transactions never hurt their neighbours (docs/design.md, "Which statement locks what").
--
-- 1. A db_function task's transaction held its task row FOR UPDATE (queues.lock_lease) for as long
--    as the function ran. Every other statement that touches the row waited behind it: the
--    worker's renewal of all its leases (one statement, so no lease of that worker was renewed
--    until the function committed, and tasks beside it expired and ran again), a cancel, a retry,
--    a failure written from another connection. lock_lease now takes FOR KEY SHARE, which no
--    UPDATE that leaves task_id alone conflicts with: renewals, cancels and releases go around the
--    function's transaction, and its completion, in the same transaction, is fenced by the lease
--    as any other (a cancelled or taken-over task refuses it, and the function's work is rolled
--    back). The claim's rescue of expired leases (FOR UPDATE SKIP LOCKED) still skips the row
--    while the function runs: nobody takes the task over under it.
--    cancel_task, retry_task and fail_attempt lock with FOR NO KEY UPDATE for the same reason.
--
-- 2. Statements that update several tasks lock them in task_id order (renew_leases,
--    complete_tasks_with_results, release_tasks): a worker's renewal and its completer's batch no
--    longer deadlock on the same two tasks taken in opposite orders. A renewal never waits at all
--    (SKIP LOCKED): a row locked at that moment is renewed at the next tick.
--
-- 3. Outcomes are stamped with the time they happen (clock_timestamp()), not with the start of
--    their transaction: a db_function task that ran 15 s completes 15 s after its claim.
--
-- 4. renew_leases and lost_leases return the lease ids they answer for, so a worker holding a
--    task under two leases (a stale run and a newer one) tells them apart.

create or replace function queues.lock_lease(_task_id bigint, _lease_id bigint) returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    perform 1 from queues.task
    where task_id = _task_id and lease_id = _lease_id and lease_expires_at is not null  -- i.e. running
    for key share;
    return found;
end $$;

create or replace function queues.cancel_task(_task_id bigint, _reason text default null)
returns queues.task_status
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
begin
    select * into _t from queues.task where task_id = _task_id for no key update;
    if not found then
        raise exception 'task % does not exist', _task_id using errcode = 'no_data_found';
    end if;
    if _t.status = 'cancelled' then
        return _t.status;
    end if;
    if _t.status = 'completed' then
        raise exception 'task % is already completed and cannot be cancelled', _task_id
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    update queues.task set status = 'cancelled', cancelled_at = clock_timestamp(), lease_expires_at = null
    where task_id = _task_id;
    insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
    values (_task_id, 'cancelled', _t.status, 'cancelled', _t.lease_id, session_user, _t.attempt,
            left(nullif(_reason, ''), 1024));
    if _t.status = 'running' and _t.lease_expires_at is not null then
        perform pg_notify('taskorch_cancel', _task_id::text || ':' || _t.lease_id::text);
    end if;
    return 'cancelled';
end $$;

create or replace function queues.retry_task(_task_id bigint) returns queues.task_status
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
begin
    select * into _t from queues.task where task_id = _task_id for no key update;
    if not found then
        raise exception 'task % does not exist', _task_id using errcode = 'no_data_found';
    end if;
    if _t.status = 'running' then
        raise exception 'task % is running; cancel it or wait for it to finish before retrying', _task_id
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    if _t.status = 'completed' then
        raise exception 'task % is already completed; enqueue a new task to run it again', _task_id
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    update queues.task
    set status = 'pending', run_at = clock_timestamp(),
        attempt = case when _t.status = 'pending' then attempt else 0 end,
        limit_name = (select l.task_type from internal.limit_of(_t.task_type, _t.payload) l),
        limit_key = (select internal.limit_key(l.key_field, _t.payload) from internal.limit_of(_t.task_type, _t.payload) l
                     where l.task_type is not null)
    where task_id = _task_id;
    insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
    values (_task_id, 'retried', _t.status, 'pending', null, session_user, _t.attempt,
            format('retried by hand after %s attempt(s)', _t.attempt));
    perform pg_notify('taskorch_task', '');
    return 'pending';
end $$;

create or replace function internal.fail_attempt(
    _caller text, _task_id bigint, _error_message text, _lease_id bigint, _retriable boolean,
    _retry_delay interval, _max_attempts integer, _context jsonb)
returns queues.task_status
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
    _msg text := left(coalesce(nullif(_error_message, ''), 'unknown error'), 8192);
    _to queues.task_status;
    _ctx jsonb := case when jsonb_typeof(_context) = 'object' then _context else '{}'::jsonb end;
    _policy jsonb := '{}'::jsonb;
    _now timestamptz := clock_timestamp();
begin
    if _retry_delay < interval '0' or _retry_delay > interval '100 years' then
        raise exception '%: _retry_delay must be between 0 and 100 years, got %', _caller, _retry_delay
            using errcode = 'invalid_parameter_value';
    end if;
    if _max_attempts < 1 then
        raise exception '%: _max_attempts must be at least 1, got %', _caller, _max_attempts
            using errcode = 'invalid_parameter_value';
    end if;

    select * into _t from queues.task where task_id = _task_id for no key update;
    if not found then
        raise exception 'task % does not exist', _task_id using errcode = 'no_data_found';
    end if;

    if _t.status <> 'running' or _t.lease_id is distinct from _lease_id then
        if exists (select from queues.task_event e
                   where e.task_id = _task_id and e.lease_id = _lease_id
                     and e.event in ('retry_scheduled', 'dead', 'failed')) then
            return _t.status;  -- this lease already failed the task: a harmless repeat
        end if;
        insert into queues.error (task_id, error_message, context)
        values (_task_id,
                format('failure refused: lease %s is not the current lease of task %s (current lease %s, status %s); the failure was: %s',
                       coalesce(_lease_id::text, 'NULL'), _task_id, _t.lease_id, _t.status, _msg),
                _ctx || jsonb_build_object('operation', 'fail', 'lease_id', _lease_id,
                                           'current_lease_id', _t.lease_id, 'status', _t.status));
        return null;
    end if;

    _to := case when not coalesce(_retriable, true) then 'failed'
                when _t.attempt >= least(_t.max_attempts, coalesce(_max_attempts, _t.max_attempts)) then 'dead'
                else 'pending' end;
    if _max_attempts is not null then
        _policy := _policy || jsonb_build_object('handler_max_attempts', _max_attempts);
    end if;
    if _retry_delay is not null and _to = 'pending' then
        _policy := _policy || jsonb_build_object('retry_delay', _retry_delay::text);
    end if;

    update queues.task
    set status = _to,
        last_error = _msg,
        lease_expires_at = null,
        run_at = case when _to = 'pending' then _now + coalesce(_retry_delay, queues.retry_delay(_t.attempt)) else run_at end,
        failed_at = case when _to = 'failed' then _now else failed_at end,
        dead_at = case when _to = 'dead' then _now else dead_at end
    where task_id = _task_id;

    insert into queues.error (task_id, error_message, context)
    values (_task_id, _msg,
            _ctx || _policy || jsonb_build_object('operation', 'fail', 'lease_id', _lease_id, 'worker_id', _t.worker_id,
                                                  'attempt', _t.attempt, 'max_attempts', _t.max_attempts, 'outcome', _to));
    insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
    values (_task_id, case _to when 'pending' then 'retry_scheduled' else _to::text end,
            'running', _to, _lease_id, _t.worker_id, _t.attempt, _msg);
    return _to;
end $$;

create or replace function queues.complete_failed_call(_task_id bigint, _lease_id bigint, _reason text, _error_message text)
returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _msg text := left(coalesce(nullif(_error_message, ''), 'unknown error'), 8192);
begin
    update queues.task t
    set status = 'completed', completed_at = clock_timestamp(), lease_expires_at = null,
        last_error = _msg, call_failure = coalesce(nullif(_reason, ''), 'call_failed')
    where t.task_id = _task_id and t.lease_id = _lease_id and t.lease_expires_at is not null;  -- i.e. running
    if found then
        return true;
    end if;
    -- Not running under the lease: complete_task says whether it is a repeat, or records the refusal.
    return queues.complete_task(_task_id, _lease_id);
end $$;

create or replace function queues.complete_tasks_with_results(_task_ids bigint[], _lease_ids bigint[], _results jsonb[])
returns table (task_id bigint, status text)
language plpgsql security definer set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan as $$
#variable_conflict use_column
declare
    _n integer := coalesce(cardinality(_task_ids), 0);
    _done bigint[];
    _skip bigint[] := '{}';
    _big record;
    _s queues.task_status;
begin
    if coalesce(cardinality(_lease_ids), 0) <> _n or (_results is not null and cardinality(_results) <> _n) then
        raise exception 'complete_tasks_with_results: % task ids, % lease ids and % results; expected one of each per task',
            _n, coalesce(cardinality(_lease_ids), 0), coalesce(cardinality(_results), 0)
            using errcode = 'invalid_parameter_value';
    end if;

    if _results is not null then
        -- Results over the bound: the task fails, without retry, and is not completed.
        for _big in
            select c.task_id, c.lease_id, pg_column_size(c.result) as bytes
            from unnest(_task_ids, _lease_ids, _results) as c(task_id, lease_id, result)
            where pg_column_size(c.result) > internal.max_payload_bytes()
            order by c.task_id
        loop
            _skip := _skip || _big.task_id;
            _s := queues.fail_task(_big.task_id,
                format('the task''s result is %s bytes, over the database''s limit of %s bytes (8 MiB) per task; the task is failed, its result not stored',
                       _big.bytes, internal.max_payload_bytes()),
                _big.lease_id, false,
                jsonb_build_object('reason', 'result_too_large', 'result_bytes', _big.bytes));
            if _s is not null then
                return query select _big.task_id, _s::text;
            end if;
        end loop;
    end if;

    -- Lock first, in task_id order (so a renewal of the same tasks cannot deadlock with it), then
    -- complete what is still running under the given lease.
    with c as (
        select u.task_id, u.lease_id, u.result
        from unnest(_task_ids, _lease_ids, coalesce(_results, array_fill(null::jsonb, array[_n])))
             as u(task_id, lease_id, result)
        where u.task_id <> all (_skip)
    ), held as (
        select t.task_id, c.result
        from queues.task t
        join c on t.task_id = c.task_id and t.lease_id = c.lease_id
        where t.lease_expires_at is not null  -- i.e. running
        order by t.task_id
        for no key update of t
    ), done as (
        update queues.task t
        set status = 'completed', completed_at = clock_timestamp(), lease_expires_at = null, result = h.result
        from held h
        where t.task_id = h.task_id
        returning t.task_id
    )
    select coalesce(array_agg(d.task_id), '{}') into _done from done d;

    return query select d, 'completed' from unnest(_done) as d;
    if cardinality(_done) + cardinality(_skip) = _n then
        return;
    end if;

    -- Repeats under the lease that completed the task count as done (the result of the first
    -- completion stands).
    return query
    select c.task_id, 'completed'
    from unnest(_task_ids, _lease_ids) as c(task_id, lease_id)
    join queues.task t on t.task_id = c.task_id
    where c.task_id <> all (_done) and c.task_id <> all (_skip) and t.status = 'completed' and t.lease_id = c.lease_id;

    insert into queues.error (task_id, error_message, context)
    select c.task_id,
           case when t.task_id is null then format('completion refused: task %s does not exist', c.task_id)
                else format('completion refused: lease %s is not the current lease of task %s (current lease %s, status %s)',
                            coalesce(c.lease_id::text, 'NULL'), c.task_id, t.lease_id, t.status) end,
           jsonb_build_object('operation', 'complete', 'lease_id', c.lease_id,
                              'current_lease_id', t.lease_id, 'status', t.status)
    from unnest(_task_ids, _lease_ids) as c(task_id, lease_id)
    left join queues.task t on t.task_id = c.task_id
    where c.task_id <> all (_done) and c.task_id <> all (_skip)
      and not coalesce(t.status = 'completed' and t.lease_id = c.lease_id, false);
end $$;

drop function queues.renew_leases(bigint[], bigint[], interval);
create function queues.renew_leases(_task_ids bigint[], _lease_ids bigint[], _lease_duration interval default '5 minutes')
returns table (task_id bigint, lease_expires_at timestamptz, lease_id bigint)
language sql security definer set search_path = pg_catalog, pg_temp as $$
    -- SKIP LOCKED: a renewal never waits. A row locked now is being completed, cancelled or
    -- released (and then needs no renewal), or is locked by some long transaction: it is renewed
    -- at the next tick, and is not taken over meanwhile (the rescue of expired leases skips
    -- locked rows too).
    with held as (
        select t.task_id
        from queues.task t
        join unnest(_task_ids, _lease_ids) as c(task_id, lease_id) on t.task_id = c.task_id and t.lease_id = c.lease_id
        where t.lease_expires_at is not null  -- i.e. running
        order by t.task_id
        for no key update of t skip locked
    )
    update queues.task t
    set lease_expires_at = clock_timestamp() + _lease_duration
    from held h
    where t.task_id = h.task_id
    returning t.task_id, t.lease_expires_at, t.lease_id
$$;
revoke all on function queues.renew_leases(bigint[], bigint[], interval) from public;
grant execute on function queues.renew_leases(bigint[], bigint[], interval) to worker_service_user;

drop function queues.lost_leases(bigint[], bigint[]);
create function queues.lost_leases(_task_ids bigint[], _lease_ids bigint[])
returns table (task_id bigint, lease_id bigint, status queues.task_status)
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _task_ids is null or _lease_ids is null or cardinality(_task_ids) <> cardinality(_lease_ids) then
        raise exception 'lost_leases: _task_ids and _lease_ids must be arrays of the same length, got % and %',
            coalesce(cardinality(_task_ids)::text, 'NULL'), coalesce(cardinality(_lease_ids)::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    return query
    select c.task_id, c.lease_id, t.status
    from unnest(_task_ids, _lease_ids) as c(task_id, lease_id)
    left join queues.task t on t.task_id = c.task_id
    where t.task_id is null
       or t.lease_id is distinct from c.lease_id
       or t.status <> 'running'
       or t.lease_expires_at is null;  -- renew_leases would not extend it
end $$;
revoke all on function queues.lost_leases(bigint[], bigint[]) from public;
grant execute on function queues.lost_leases(bigint[], bigint[]) to worker_service_user;

create or replace function queues.release_tasks(_task_ids bigint[], _lease_ids bigint[], _reason text default null)
returns setof bigint
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    return query
    with held as (
        select t.task_id
        from queues.task t
        join unnest(_task_ids, _lease_ids) as c(task_id, lease_id) on t.task_id = c.task_id and t.lease_id = c.lease_id
        where t.lease_expires_at is not null  -- i.e. running
        order by t.task_id
        for no key update of t
    ), rel as (
        update queues.task t
        set status = 'pending', run_at = clock_timestamp(), lease_expires_at = null, attempt = greatest(t.attempt - 1, 0)
        from held h
        where t.task_id = h.task_id
        returning t.task_id, t.lease_id, t.worker_id, t.attempt
    ), ev as (
        insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
        select r.task_id, 'released', 'running', 'pending', r.lease_id, r.worker_id, r.attempt + 1,
               coalesce(left(nullif(_reason, ''), 1024), 'released by its worker')
        from rel r
    )
    select r.task_id from rel r;
end $$;

create or replace function queues.rescue_expired_leases(_limit integer default 1000) returns integer
language plpgsql security definer set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan as $$
declare
    _n integer;
    _now timestamptz := clock_timestamp();
begin
    with expired as (
        select t.task_id
        from queues.task t
        where t.status = 'running' and t.lease_expires_at < _now
        order by t.lease_expires_at
        limit _limit
        for update skip locked
    ), upd as (
        update queues.task t
        set status = case when t.attempt >= t.max_attempts then 'dead'::queues.task_status else 'pending' end,
            dead_at = case when t.attempt >= t.max_attempts then _now else t.dead_at end,
            -- now(), the claim's own time: the claim that rescues the task may take it.
            run_at = case when t.attempt >= t.max_attempts then t.run_at else now() end,
            lease_expires_at = null,
            last_error = format('lease %s expired: worker %s did not finish attempt %s of %s',
                                t.lease_id, coalesce(t.worker_id, '(none)'), t.attempt, t.max_attempts)
        from expired e
        where t.task_id = e.task_id
        returning t.task_id, t.status, t.lease_id, t.worker_id, t.attempt, t.last_error
    ), ev as (
        -- Stamped with the claim's time, as the lease the same claim may then write: the expiry
        -- comes first in the task's history.
        insert into queues.task_event (task_id, occurred_at, event, from_status, to_status, lease_id, worker_id, attempt, detail)
        select u.task_id, now(), 'lease_expired', 'running', u.status, u.lease_id, u.worker_id, u.attempt, u.last_error
        from upd u
    ), err as (
        insert into queues.error (task_id, occurred_at, error_message, context)
        select u.task_id, now(), u.last_error,
               jsonb_build_object('operation', 'lease_expired', 'lease_id', u.lease_id,
                                  'worker_id', u.worker_id, 'attempt', u.attempt)
        from upd u
    )
    select count(*) into _n from upd;
    return _n;
end $$;

-- History rows are stamped when they are written.
alter table queues.task_event alter column occurred_at set default clock_timestamp();
alter table queues.error alter column occurred_at set default clock_timestamp();
