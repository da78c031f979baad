-- taskorch core SQL API: enqueue, claim, complete, fail, snooze, renew, cancel, retry.
--
-- Every function that writes is SECURITY DEFINER with a fixed search_path and refers to every
-- object by its schema, so a caller needs EXECUTE on the function and nothing else: no table
-- privileges, and no way to redirect a name through a schema of its own.
--
-- Errors callers can test for (SQLSTATE):
--   22023 invalid_parameter_value           bad input (malformed type, payload not an object, ...)
--   P0002 no_data_found                     unknown task id
--   55000 object_not_in_prerequisite_state  a transition the task's status does not allow
-- A completion or failure under a stale lease is not an error: it is refused, recorded in
-- queues.error, and reported by the return value.

-- The default number of attempts a task gets (the first run included).
create function queues.default_max_attempts() returns integer
language sql immutable parallel safe as $$ select 25 $$;

alter table queues.task alter column max_attempts set default queues.default_max_attempts();

-- Delay before retry number _attempt+1 after attempt _attempt failed: exponential backoff with
-- full jitter, uniform in [0, min(1 hour, 2^attempt seconds)). An operator may replace this
-- function (CREATE OR REPLACE with the same signature) to change the policy for every task.
create function queues.retry_delay(_attempt integer) returns interval
language sql volatile parallel safe as $$
    select make_interval(secs => random() * least(3600.0, power(2.0, least(greatest(_attempt, 1), 30))))
$$;

-- Validates one task's definition; raises 22023 with a message that says what is wrong.
create function internal.check_task_input(
    _task_type text, _payload jsonb, _max_attempts integer, _idempotency_key text, _label text default 'enqueue')
returns void
language plpgsql immutable set search_path = pg_catalog, pg_temp as $$
begin
    if _task_type is null or _task_type = '' then
        raise exception '%: task_type must not be empty', _label using errcode = 'invalid_parameter_value';
    end if;
    if _task_type !~ '^[A-Za-z][A-Za-z0-9_.:-]*$' or length(_task_type) > 128 then
        raise exception '%: task_type % is malformed: use 1 to 128 letters, digits, "_", ".", ":" or "-", starting with a letter',
            _label, quote_literal(left(_task_type, 140)) using errcode = 'invalid_parameter_value';
    end if;
    if _payload is null or jsonb_typeof(_payload) <> 'object' then
        raise exception '%: payload must be a JSON object, got %', _label, coalesce(jsonb_typeof(_payload), 'null')
            using errcode = 'invalid_parameter_value';
    end if;
    if _max_attempts is not null and _max_attempts < 1 then
        raise exception '%: max_attempts must be at least 1, got %', _label, _max_attempts
            using errcode = 'invalid_parameter_value';
    end if;
    if _idempotency_key is not null and length(_idempotency_key) not between 1 and 512 then
        raise exception '%: idempotency_key must be 1 to 512 characters, got %', _label, length(_idempotency_key)
            using errcode = 'invalid_parameter_value';
    end if;
end $$;

-- Enqueues one task and says whether an existing task was returned instead (same task_type and
-- idempotency_key). Safe under concurrent callers: exactly one task is created per key.
create function queues.enqueue_with_result(
    _task_type text,
    _payload jsonb,
    _scheduled_at timestamptz default now(),
    _priority integer default 0,
    _idempotency_key text default null,
    _max_attempts integer default null)
returns table (task_id bigint, duplicate boolean)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _id bigint;
begin
    perform internal.check_task_input(_task_type, _payload, _max_attempts, _idempotency_key);
    _scheduled_at := coalesce(_scheduled_at, now());

    if _idempotency_key is null then
        insert into queues.task (task_type, payload, priority, scheduled_at, run_at, max_attempts)
        values (_task_type, _payload, coalesce(_priority, 0), _scheduled_at, _scheduled_at,
                coalesce(_max_attempts, queues.default_max_attempts()))
        returning queues.task.task_id into _id;
        return query select _id, false;
        return;
    end if;

    -- With a key: insert, or find the task that holds it. The loop covers the rare case where
    -- the holder disappears (rolled back or pruned) between the two statements.
    for _i in 1..3 loop
        insert into queues.task (task_type, payload, priority, idempotency_key, scheduled_at, run_at, max_attempts)
        values (_task_type, _payload, coalesce(_priority, 0), _idempotency_key, _scheduled_at, _scheduled_at,
                coalesce(_max_attempts, queues.default_max_attempts()))
        on conflict (task_type, idempotency_key) where idempotency_key is not null do nothing
        returning queues.task.task_id into _id;
        if _id is not null then
            return query select _id, false;
            return;
        end if;

        select t.task_id into _id
        from queues.task t
        where t.task_type = _task_type and t.idempotency_key = _idempotency_key;
        if _id is not null then
            return query select _id, true;
            return;
        end if;
    end loop;
    raise exception 'enqueue: could not insert or find the task with idempotency key %', quote_literal(_idempotency_key)
        using errcode = 'serialization_failure';
end $$;

-- Enqueues one task (seeds 000/002/001). Returns the task id; with a (task_type,
-- idempotency_key) that already exists, returns the existing task's id and creates nothing.
create function queues.enqueue(
    _task_type text,
    _payload jsonb,
    _scheduled_at timestamptz default now(),
    _priority integer default 0,
    _idempotency_key text default null,
    _max_attempts integer default null)
returns bigint
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    select r.task_id
    from queues.enqueue_with_result(_task_type, _payload, _scheduled_at, _priority, _idempotency_key, _max_attempts) r
$$;

-- Enqueues many tasks in one statement. Arrays are parallel: element i of each describes task i;
-- every array but the first two may be NULL (defaults for all) or hold NULLs (default for one).
-- Returns the task ids in input order (an existing id where an idempotency key matched).
create function queues.enqueue_many(
    _task_types text[],
    _payloads jsonb[],
    _scheduled_ats timestamptz[] default null,
    _priorities integer[] default null,
    _idempotency_keys text[] default null,
    _max_attempts integer[] default null)
returns bigint[]
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _n integer := coalesce(cardinality(_task_types), 0);
    _bad record;
    _ids bigint[];
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
        return '{}';
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
        -- Fast path: no idempotency keys, so no conflicts. Ids are drawn in input order.
        with input as materialized (
            select u.ord, u.task_type, u.payload,
                   coalesce(u.scheduled_at, now()) as scheduled_at,
                   coalesce(u.priority, 0) as priority,
                   coalesce(u.max_attempts, queues.default_max_attempts()) as max_attempts,
                   nextval('queues.task_task_id_seq'::regclass) as task_id
            from unnest(_task_types, _payloads,
                        coalesce(_scheduled_ats, array_fill(null::timestamptz, array[_n])),
                        coalesce(_priorities, array_fill(null::integer, array[_n])),
                        coalesce(_max_attempts, array_fill(null::integer, array[_n])))
                 with ordinality as u(task_type, payload, scheduled_at, priority, max_attempts, ord)
        ), ins as (
            insert into queues.task (task_id, task_type, payload, priority, scheduled_at, run_at, max_attempts)
            select i.task_id, i.task_type, i.payload, i.priority, i.scheduled_at, i.scheduled_at, i.max_attempts
            from input i
        )
        select array_agg(i.task_id order by i.ord) into _ids from input i;
        return _ids;
    end if;

    -- With keys: the first occurrence of a key in the batch is inserted (or finds the existing
    -- task); later occurrences share its id.
    -- Ids are drawn in scan order (input order) before the window sorts by key.
    with numbered as materialized (
        select u.ord, u.task_type, u.payload, u.idempotency_key,
               coalesce(u.scheduled_at, now()) as scheduled_at,
               coalesce(u.priority, 0) as priority,
               coalesce(u.max_attempts, queues.default_max_attempts()) as max_attempts,
               nextval('queues.task_task_id_seq'::regclass) as task_id
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
        insert into queues.task (task_id, task_type, payload, priority, idempotency_key, scheduled_at, run_at, max_attempts)
        select i.task_id, i.task_type, i.payload, i.priority, i.idempotency_key, i.scheduled_at, i.scheduled_at, i.max_attempts
        from input i
        where i.first_of_key
        on conflict (task_type, idempotency_key) where idempotency_key is not null do nothing
        returning task_id
    )
    select array_agg(ins.task_id order by i.ord) into _ids
    from input i left join ins on ins.task_id = i.task_id;

    if array_position(_ids, null) is not null then
        -- Resolve keys held by existing tasks (or by an earlier element of this batch) in a new
        -- statement, which sees everything committed so far.
        select array_agg(coalesce(g.task_id, t.task_id) order by g.ord) into _ids
        from unnest(_ids, _task_types, _idempotency_keys) with ordinality as g(task_id, task_type, idempotency_key, ord)
        left join queues.task t
               on g.task_id is null and t.task_type = g.task_type and t.idempotency_key = g.idempotency_key;
        if array_position(_ids, null) is not null then
            raise exception 'enqueue_many: a task holding one of the idempotency keys disappeared during the call; retry'
                using errcode = 'serialization_failure';
        end if;
    end if;
    return _ids;
end $$;

-- Returns tasks whose lease expired (their worker died or hung) to pending, or to dead when the
-- expired lease was their last attempt. An expired lease counts as an attempt, so a task that
-- kills its worker cannot loop forever. Called by every claim; cheap when nothing has expired.
create function queues.rescue_expired_leases(_limit integer default 1000) returns integer
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _n integer;
begin
    with expired as (
        select t.task_id
        from queues.task t
        where t.status = 'running' and t.lease_expires_at < now()
        order by t.lease_expires_at
        limit _limit
        for update skip locked
    ), upd as (
        update queues.task t
        set status = case when t.attempt >= t.max_attempts then 'dead'::queues.task_status else 'pending' end,
            dead_at = case when t.attempt >= t.max_attempts then now() else t.dead_at end,
            run_at = case when t.attempt >= t.max_attempts then t.run_at else now() end,
            lease_expires_at = null,
            last_error = format('lease %s expired: worker %s did not finish attempt %s of %s',
                                t.lease_id, coalesce(t.worker_id, '(none)'), t.attempt, t.max_attempts)
        from expired e
        where t.task_id = e.task_id
        returning t.task_id, t.status, t.lease_id, t.worker_id, t.attempt, t.last_error
    ), ev as (
        insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
        select u.task_id, 'lease_expired', 'running', u.status, u.lease_id, u.worker_id, u.attempt, u.last_error
        from upd u
    ), err as (
        insert into queues.error (task_id, error_message, context)
        select u.task_id, u.last_error,
               jsonb_build_object('operation', 'lease_expired', 'lease_id', u.lease_id,
                                  'worker_id', u.worker_id, 'attempt', u.attempt)
        from upd u
    )
    select count(*) into _n from upd;
    return _n;
end $$;

-- Claims up to _limit due tasks for a worker in one statement: priority (higher first), then
-- run_at (the scheduled time, moved by retries), then task_id. Each claimed task gets a new lease
-- (a task_lease row whose id is the fencing token) and a 'claimed' event.
create function queues.claim_tasks(
    _worker_id text,
    _limit integer,
    _lease_duration interval default interval '5 minutes',
    _task_types text[] default null)
returns setof queues.task
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _limit is null or _limit < 1 then
        raise exception 'claim_tasks: _limit must be at least 1, got %', _limit using errcode = 'invalid_parameter_value';
    end if;
    if _lease_duration is null or _lease_duration <= interval '0' then
        raise exception 'claim_tasks: _lease_duration must be positive, got %', _lease_duration
            using errcode = 'invalid_parameter_value';
    end if;

    perform queues.rescue_expired_leases();

    return query
    with picked as (
        select t.task_id, t.attempt
        from queues.task t
        where t.status = 'pending'
          and t.run_at <= now()
          and (_task_types is null or t.task_type = any (_task_types))
        order by t.priority desc, t.run_at, t.task_id
        limit _limit
        for update skip locked
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

-- Seed 000/002: claims the next available task with a 5-minute lease, for a caller without a
-- worker id (psql, a script). Returns NULL when nothing is due.
create function queues.dequeue_next_available_task() returns queues.task
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
begin
    select * into _t from queues.claim_tasks('sql:' || session_user, 1);
    return _t;
end $$;

-- The same for a named worker and lease duration.
create function queues.dequeue_next_available_task(_worker_id text, _lease_duration interval default interval '5 minutes')
returns queues.task
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
begin
    select * into _t from queues.claim_tasks(_worker_id, 1, _lease_duration);
    return _t;
end $$;

-- Completes tasks in one statement, each under the lease it was claimed with. Returns the ids
-- that are completed under the given lease, now or by an earlier call (so a repeat is harmless).
-- The rest are refused, not applied: each refusal is recorded in queues.error.
create function queues.complete_tasks(_task_ids bigint[], _lease_ids bigint[])
returns setof bigint
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _done bigint[];
begin
    if coalesce(cardinality(_task_ids), 0) <> coalesce(cardinality(_lease_ids), 0) then
        raise exception 'complete_tasks: % task ids but % lease ids', cardinality(_task_ids), cardinality(_lease_ids)
            using errcode = 'invalid_parameter_value';
    end if;

    with done as (
        update queues.task t
        set status = 'completed', completed_at = now(), lease_expires_at = null
        from unnest(_task_ids, _lease_ids) as c(task_id, lease_id)
        where t.task_id = c.task_id and t.lease_id = c.lease_id and t.lease_expires_at is not null  -- i.e. running
        returning t.task_id, t.lease_id, t.worker_id, t.attempt
    ), ev as (
        insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt)
        select d.task_id, 'completed', 'running', 'completed', d.lease_id, d.worker_id, d.attempt
        from done d
    )
    select coalesce(array_agg(d.task_id), '{}') into _done from done d;

    return query select unnest(_done);
    if cardinality(_done) = coalesce(cardinality(_task_ids), 0) then
        return;
    end if;

    -- Repeats under the lease that completed the task count as done.
    return query
    select c.task_id
    from unnest(_task_ids, _lease_ids) as c(task_id, lease_id)
    join queues.task t on t.task_id = c.task_id
    where c.task_id <> all (_done) and t.status = 'completed' and t.lease_id = c.lease_id;

    insert into queues.error (task_id, error_message, context)
    select c.task_id,
           case when t.task_id is null then format('completion refused: task %s does not exist', c.task_id)
                else format('completion refused: lease %s is not the current lease of task %s (current lease %s, status %s)',
                            coalesce(c.lease_id::text, 'NULL'), c.task_id, t.lease_id, t.status) end,
           jsonb_build_object('operation', 'complete', 'lease_id', c.lease_id,
                              'current_lease_id', t.lease_id, 'status', t.status)
    from unnest(_task_ids, _lease_ids) as c(task_id, lease_id)
    left join queues.task t on t.task_id = c.task_id
    where c.task_id <> all (_done)
      and not coalesce(t.status = 'completed' and t.lease_id = c.lease_id, false);
end $$;

-- Completes a task under a lease (the worker's form). True when the task is completed under
-- that lease (now or before); false when refused because the lease is stale (recorded in
-- queues.error). Raises P0002 for an unknown task.
create function queues.complete_task(_task_id bigint, _lease_id bigint) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if not exists (select from queues.task where task_id = _task_id) then
        raise exception 'task % does not exist', _task_id using errcode = 'no_data_found';
    end if;
    return exists (select from queues.complete_tasks(array[_task_id], array[_lease_id]));
end $$;

-- Seed 002's form: completes a task under its current lease.
create function queues.complete_task(_task_id bigint) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _lease bigint;
begin
    select lease_id into _lease from queues.task where task_id = _task_id;
    if not found then
        raise exception 'task % does not exist', _task_id using errcode = 'no_data_found';
    end if;
    return queues.complete_task(_task_id, _lease);
end $$;

-- Fails the attempt a lease holds (the worker's form). While attempts remain and the failure is
-- retriable the task goes back to pending after queues.retry_delay; with no attempts left it is
-- dead; a non-retriable failure makes it failed. The error is recorded in queues.error with
-- _context. Returns the task's new status, or NULL when refused because the lease is stale
-- (the refusal is recorded). A repeat under the same lease returns the status without change.
create function queues.fail_task(
    _task_id bigint,
    _error_message text,
    _lease_id bigint,
    _retriable boolean default true,
    _context jsonb default null)
returns queues.task_status
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
    _msg text := left(coalesce(nullif(_error_message, ''), 'unknown error'), 8192);
    _to queues.task_status;
    _ctx jsonb := case when jsonb_typeof(_context) = 'object' then _context else '{}'::jsonb end;
begin
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

    _to := case when not coalesce(_retriable, true) then 'failed'
                when _t.attempt >= _t.max_attempts then 'dead'
                else 'pending' end;

    update queues.task
    set status = _to,
        last_error = _msg,
        lease_expires_at = null,
        run_at = case when _to = 'pending' then now() + queues.retry_delay(_t.attempt) else run_at end,
        failed_at = case when _to = 'failed' then now() else failed_at end,
        dead_at = case when _to = 'dead' then now() else dead_at end
    where task_id = _task_id;

    insert into queues.error (task_id, error_message, context)
    values (_task_id, _msg,
            _ctx || jsonb_build_object('operation', 'fail', 'lease_id', _lease_id, 'worker_id', _t.worker_id,
                                       'attempt', _t.attempt, 'max_attempts', _t.max_attempts, 'outcome', _to));
    insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
    values (_task_id, case _to when 'pending' then 'retry_scheduled' else _to::text end,
            'running', _to, _lease_id, _t.worker_id, _t.attempt, _msg);
    return _to;
end $$;

-- Seed 002's form: fails the attempt under the task's current lease.
create function queues.fail_task(_task_id bigint, _error_message text) returns queues.task_status
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _lease bigint;
begin
    select lease_id into _lease from queues.task where task_id = _task_id;
    if not found then
        raise exception 'task % does not exist', _task_id using errcode = 'no_data_found';
    end if;
    return queues.fail_task(_task_id, _error_message, _lease);
end $$;

-- Puts a running task back to pending until _run_at without spending an attempt (a handler that
-- asked to be snoozed). True when applied; false when the lease is stale.
create function queues.snooze_task(_task_id bigint, _lease_id bigint, _run_at timestamptz) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
begin
    update queues.task
    set status = 'pending', run_at = coalesce(_run_at, now()), lease_expires_at = null,
        attempt = greatest(attempt - 1, 0)
    where task_id = _task_id and lease_id = _lease_id and lease_expires_at is not null  -- i.e. running
    returning * into _t;
    if not found then
        return false;
    end if;
    insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
    values (_task_id, 'snoozed', 'running', 'pending', _lease_id, _t.worker_id, _t.attempt + 1,
            'until ' || coalesce(_run_at, now())::text);
    return true;
end $$;

-- Extends the leases of running tasks (a worker renewing everything it holds in one statement).
-- Returns the tasks renewed with their new expiry; a task missing from the result has been lost
-- (expired and taken, cancelled) and its worker should stop working on it.
create function queues.renew_leases(_task_ids bigint[], _lease_ids bigint[], _lease_duration interval default interval '5 minutes')
returns table (task_id bigint, lease_expires_at timestamptz)
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    update queues.task t
    set lease_expires_at = now() + _lease_duration
    from unnest(_task_ids, _lease_ids) as c(task_id, lease_id)
    where t.task_id = c.task_id and t.lease_id = c.lease_id and t.lease_expires_at is not null  -- i.e. running
    returning t.task_id, t.lease_expires_at
$$;

-- Cancels a task that is pending, running, failed or dead. A running task's worker finds out when
-- it next renews its lease, and its completion is refused. Cancelling a cancelled task is a
-- no-op; a completed task cannot be cancelled (55000). Returns the new status.
create function queues.cancel_task(_task_id bigint, _reason text default null) returns queues.task_status
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
begin
    select * into _t from queues.task where task_id = _task_id for update;
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
    update queues.task set status = 'cancelled', cancelled_at = now(), lease_expires_at = null
    where task_id = _task_id;
    insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
    values (_task_id, 'cancelled', _t.status, 'cancelled', _t.lease_id, session_user, _t.attempt,
            left(nullif(_reason, ''), 1024));
    return 'cancelled';
end $$;

-- Retries a task by hand: a dead, failed or cancelled task goes back to pending now with its
-- attempts reset (its history stays); a pending one is made due now. A running or completed
-- task cannot be retried (55000). Returns the new status.
create function queues.retry_task(_task_id bigint) returns queues.task_status
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
begin
    select * into _t from queues.task where task_id = _task_id for update;
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
    set status = 'pending', run_at = now(),
        attempt = case when _t.status = 'pending' then attempt else 0 end
    where task_id = _task_id;
    insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
    values (_task_id, 'retried', _t.status, 'pending', null, session_user, _t.attempt,
            format('retried by hand after %s attempt(s)', _t.attempt));
    perform pg_notify('taskorch_task', '');
    return 'pending';
end $$;

-- Least privilege. Nothing here is executable by PUBLIC; the worker role gets exactly what a
-- worker calls. Applications are granted queues.enqueue* by the operator (docs/security.md).
revoke all on all functions in schema queues from public;
revoke all on all functions in schema internal from public;
revoke all on all tables in schema queues from public;

grant usage on schema queues, internal to worker_service_user;
grant execute on function
    queues.claim_tasks(text, integer, interval, text[]),
    queues.dequeue_next_available_task(),
    queues.dequeue_next_available_task(text, interval),
    queues.complete_tasks(bigint[], bigint[]),
    queues.complete_task(bigint, bigint),
    queues.complete_task(bigint),
    queues.fail_task(bigint, text, bigint, boolean, jsonb),
    queues.fail_task(bigint, text),
    queues.snooze_task(bigint, bigint, timestamptz),
    queues.renew_leases(bigint[], bigint[], interval),
    queues.rescue_expired_leases(integer)
to worker_service_user;
