-- What the Go API needs to say what it does.
--
-- 1. queues.enqueue_many_with_result: enqueue_many (0002) saying, for each task, whether it was
--    a duplicate (its idempotency key was held by an existing task, or by an earlier task of the
--    batch) as enqueue_with_result does for one. enqueue_many keeps its signature and results;
--    it is now a wrapper over the new function, so the batch insert has one definition.
-- 2. queues.fail_task_with_policy: fail_task (0002) for a retriable failure under a handler's
--    own policy: an explicit retry delay in place of queues.retry_delay, and a cap on the
--    attempts below the task's max_attempts. The worker calls it only for a type whose handler
--    sets such options; every other failure goes through fail_task, unchanged.

-- Enqueue many, with results ------------------------------------------------------------------

-- Enqueues many tasks in one statement, as enqueue_many: arrays are parallel (element i of each
-- describes task i); every array but the first two may be NULL (defaults for all) or hold NULLs
-- (default for one); all or nothing. Returns one row per task, in input order: its id, and
-- whether it is a duplicate — nothing was inserted for it because a task with the same
-- (task_type, idempotency_key) already existed or came earlier in the batch (whose id it gets).
create function queues.enqueue_many_with_result(
    _task_types text[],
    _payloads jsonb[],
    _scheduled_ats timestamptz[] default null,
    _priorities integer[] default null,
    _idempotency_keys text[] default null,
    _max_attempts integer[] default null)
returns table (task_id bigint, duplicate boolean)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    _n integer := coalesce(cardinality(_task_types), 0);
    _bad record;
    _ids bigint[];
    _dups boolean[];
begin
    if coalesce(cardinality(_payloads), 0) <> _n
        or (_scheduled_ats is not null and cardinality(_scheduled_ats) <> _n)
        or (_priorities is not null and cardinality(_priorities) <> _n)
        or (_idempotency_keys is not null and cardinality(_idempotency_keys) <> _n)
        or (_max_attempts is not null and cardinality(_max_attempts) <> _n) then
        raise exception 'enqueue_many: the arrays must all have % elements, one per task', _n
            using errcode = 'invalid_parameter_value';
    end if;
    if _n = 0 then
        return;
    end if;

    -- Validate the whole batch in one pass; report the first bad task by its position.
    select u.ord, u.task_type, u.payload, u.max_attempts, u.idempotency_key into _bad
    from unnest(_task_types, _payloads,
                coalesce(_max_attempts, array_fill(null::integer, array[_n])),
                coalesce(_idempotency_keys, array_fill(null::text, array[_n])))
         with ordinality as u(task_type, payload, max_attempts, idempotency_key, ord)
    where u.task_type is null
       or u.task_type !~ '^[A-Za-z][A-Za-z0-9_.:-]*$' or length(u.task_type) > 128
       or u.payload is null or jsonb_typeof(u.payload) <> 'object'
       or u.max_attempts < 1
       or length(u.idempotency_key) not between 1 and 512
    order by u.ord
    limit 1;
    if found then
        perform internal.check_task_input(_bad.task_type, _bad.payload, _bad.max_attempts, _bad.idempotency_key,
                                          format('task %s of %s', _bad.ord, _n));
    end if;

    if _idempotency_keys is null
       or not exists (select from unnest(_idempotency_keys) as k where k is not null) then
        -- Fast path: no idempotency keys, so no conflicts and no duplicates. Ids are drawn in
        -- input order.
        with input as materialized (
            select u.ord, u.task_type, u.payload,
                   coalesce(u.scheduled_at, now()) as scheduled_at,
                   coalesce(u.priority, 0) as priority,
                   coalesce(u.max_attempts, queues.default_max_attempts()) as max_attempts,
                   nextval('queues.task_task_id_seq'::regclass) as new_id
            from unnest(_task_types, _payloads,
                        coalesce(_scheduled_ats, array_fill(null::timestamptz, array[_n])),
                        coalesce(_priorities, array_fill(null::integer, array[_n])),
                        coalesce(_max_attempts, array_fill(null::integer, array[_n])))
                 with ordinality as u(task_type, payload, scheduled_at, priority, max_attempts, ord)
        ), ins as (
            insert into queues.task (task_id, task_type, payload, priority, scheduled_at, run_at, max_attempts)
            select i.new_id, i.task_type, i.payload, i.priority, i.scheduled_at, i.scheduled_at, i.max_attempts
            from input i
        )
        select array_agg(i.new_id order by i.ord) into _ids from input i;
        return query select r.id, false from unnest(_ids) with ordinality as r(id, ord) order by r.ord;
        return;
    end if;

    -- With keys: the first occurrence of a key in the batch is inserted (or finds the existing
    -- task); later occurrences share its id. Ids are drawn in scan order (input order) before
    -- the window sorts by key.
    with numbered as materialized (
        select u.ord, u.task_type, u.payload, u.idempotency_key,
               coalesce(u.scheduled_at, now()) as scheduled_at,
               coalesce(u.priority, 0) as priority,
               coalesce(u.max_attempts, queues.default_max_attempts()) as max_attempts,
               nextval('queues.task_task_id_seq'::regclass) as new_id
        from unnest(_task_types, _payloads,
                    coalesce(_scheduled_ats, array_fill(null::timestamptz, array[_n])),
                    coalesce(_priorities, array_fill(null::integer, array[_n])),
                    _idempotency_keys,
                    coalesce(_max_attempts, array_fill(null::integer, array[_n])))
             with ordinality as u(task_type, payload, scheduled_at, priority, idempotency_key, max_attempts, ord)
    ), input as materialized (
        select n.*,
               n.idempotency_key is null
                 or n.ord = min(n.ord) over (partition by n.task_type, n.idempotency_key) as first_of_key
        from numbered n
    ), ins as (
        insert into queues.task as t (task_id, task_type, payload, priority, idempotency_key, scheduled_at, run_at, max_attempts)
        select i.new_id, i.task_type, i.payload, i.priority, i.idempotency_key, i.scheduled_at, i.scheduled_at, i.max_attempts
        from input i
        where i.first_of_key
        on conflict (task_type, idempotency_key) where idempotency_key is not null do nothing
        returning t.task_id as inserted_id
    )
    select array_agg(ins.inserted_id order by i.ord) into _ids
    from input i left join ins on ins.inserted_id = i.new_id;

    -- An element nothing was inserted for is a duplicate.
    select array_agg(r.id is null order by r.ord) into _dups
    from unnest(_ids) with ordinality as r(id, ord);

    if array_position(_ids, null) is not null then
        -- Resolve keys held by existing tasks (or by an earlier element of this batch) in a new
        -- statement, which sees everything committed so far.
        select array_agg(coalesce(g.id, t.task_id) order by g.ord) into _ids
        from unnest(_ids, _task_types, _idempotency_keys) with ordinality as g(id, task_type, idempotency_key, ord)
        left join queues.task t
               on g.id is null and t.task_type = g.task_type and t.idempotency_key = g.idempotency_key;
        if array_position(_ids, null) is not null then
            raise exception 'enqueue_many: a task holding one of the idempotency keys disappeared during the call; retry'
                using errcode = 'serialization_failure';
        end if;
    end if;
    return query select r.id, r.dup from unnest(_ids, _dups) with ordinality as r(id, dup, ord) order by r.ord;
end $$;

-- enqueue_many (0002), same signature and results: the ids in input order (an existing id where
-- an idempotency key matched), '{}' for no tasks.
create or replace function queues.enqueue_many(
    _task_types text[],
    _payloads jsonb[],
    _scheduled_ats timestamptz[] default null,
    _priorities integer[] default null,
    _idempotency_keys text[] default null,
    _max_attempts integer[] default null)
returns bigint[]
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    select coalesce(array_agg(r.task_id order by r.ord), '{}')
    from queues.enqueue_many_with_result(_task_types, _payloads, _scheduled_ats, _priorities,
                                         _idempotency_keys, _max_attempts) with ordinality as r(task_id, duplicate, ord)
$$;

-- Fail with a handler's policy ----------------------------------------------------------------

-- Fails, as retriable, the attempt a lease holds, under the caller's policy (a Go handler's
-- options): while attempts remain the task goes back to pending after _retry_delay (NULL:
-- queues.retry_delay(attempt), as fail_task); it is dead once its attempt reaches the lesser of
-- its max_attempts and _max_attempts (NULL: its max_attempts alone). Otherwise as fail_task:
-- the error is recorded in queues.error with _context, the change in queues.task_event; returns
-- the task's new status, or NULL when refused because the lease is stale (the refusal is
-- recorded); a repeat under the same lease returns the status without change.
create function queues.fail_task_with_policy(
    _task_id bigint,
    _error_message text,
    _lease_id bigint,
    _retry_delay interval default null,
    _max_attempts integer default null,
    _context jsonb default null)
returns queues.task_status
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
    _msg text := left(coalesce(nullif(_error_message, ''), 'unknown error'), 8192);
    _to queues.task_status;
    _ctx jsonb := case when jsonb_typeof(_context) = 'object' then _context else '{}'::jsonb end;
    _policy jsonb := '{}'::jsonb;
begin
    if _retry_delay < interval '0' then
        raise exception 'fail_task_with_policy: _retry_delay must not be negative, got %', _retry_delay
            using errcode = 'invalid_parameter_value';
    end if;
    if _max_attempts < 1 then
        raise exception 'fail_task_with_policy: _max_attempts must be at least 1, got %', _max_attempts
            using errcode = 'invalid_parameter_value';
    end if;

    select * into _t from queues.task where task_id = _task_id for update;
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

    _to := case when _t.attempt >= least(_t.max_attempts, coalesce(_max_attempts, _t.max_attempts)) then 'dead'
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
        run_at = case when _to = 'pending' then now() + coalesce(_retry_delay, queues.retry_delay(_t.attempt)) else run_at end,
        dead_at = case when _to = 'dead' then now() else dead_at end
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

-- Privileges -----------------------------------------------------------------------------------
-- As their 0002 siblings: enqueue_many_with_result is granted to applications by the operator
-- with the other enqueue functions (docs/security.md); fail_task_with_policy is the worker's.
-- enqueue_many keeps its grants (CREATE OR REPLACE does not change them).
revoke all on function
    queues.enqueue_many_with_result(text[], jsonb[], timestamptz[], integer[], text[], integer[]),
    queues.fail_task_with_policy(bigint, text, bigint, interval, integer, jsonb)
from public;
grant execute on function queues.fail_task_with_policy(bigint, text, bigint, interval, integer, jsonb)
to worker_service_user;
