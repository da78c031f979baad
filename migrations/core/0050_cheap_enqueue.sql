-- An enqueue at the cost of a row (docs/design.md, "Enqueue"; docs/benchmarks.md, "Enqueue in
-- the application's transaction").
--
-- 1. Wake-ups only for a worker that waits. A transaction that sends NOTIFY takes a cluster-wide
--    lock at commit and holds it until its commit record is flushed, so notifying transactions
--    commit one at a time; with a NOTIFY per enqueueing statement, 32 sessions each committing
--    an order row and one task ran at a fifth of the order rows alone. Now a worker about to
--    wait says so (queues.worker_waiting, a sequence it bumps), and an enqueue notifies only when
--    a worker waits that no enqueue has answered yet; the enqueue that answers records the
--    answer in a second sequence. While workers are busy, or none runs, nothing is notified and
--    enqueues commit in parallel. Sequences are not transactional: every session sees a bump at
--    once, and neither takes a row lock.
--
--    The race: an enqueue that looked before the worker said it waits, and commits after the
--    worker's last claim read the table, would not wake it. Every enqueue holds a shared
--    advisory lock from its inserting statement to the end of its transaction, and
--    queues.worker_waiting tries the same lock exclusively (at once, without queueing) after its
--    bump: when it gets it, no such enqueue is in flight, and the claim the worker sends next
--    sees every task not notified about; when it does not, the worker polls every PollInterval
--    without backing off until a try succeeds, so such a task starts within PollInterval of its
--    commit (docs/worker.md, "The loop").
--
-- 2. A leaner insert. The task table's finite-times CHECK called internal.time_in_range, an SQL
--    function with a SET clause, which PostgreSQL cannot inline: ten calls per row, each
--    planned afresh in every statement, about 100 us per single-row insert or update. The
--    constraint now tests the same bounds without a function call (same name, same rule).
--    queues.insert_task tests every input rule in one expression and calls the functions that
--    word the error only when one is broken; the per-row time check of insert_tasks is inline
--    too. The Go client calls queues.insert_task directly for a task that names no function
--    (the security design allows it: the task_functions_permitted trigger still guards every
--    row, docs/security.md "Who may name a function").

-- 1. Wake-ups --------------------------------------------------------------------------------

-- Bumped by every worker about to wait for a notification.
create sequence internal.task_waiter_seq as bigint;
-- The waiter_seq value the latest notification answered: a notification is owed while it is
-- below task_waiter_seq.
create sequence internal.task_woken_seq as bigint minvalue 0 start with 0;
revoke all on sequence internal.task_waiter_seq, internal.task_woken_seq from public;

-- The advisory lock an enqueue holds (shared) until its transaction ends.
create function internal.enqueue_lock_key() returns bigint
language sql immutable parallel safe as $$ select -7863903173047144394::bigint $$;
comment on function internal.enqueue_lock_key() is
    'The advisory lock (one bigint key: hashtextextended(''taskorch.enqueue_in_flight'', 0)) every enqueue holds shared until its transaction ends; queues.worker_waiting tries it exclusively.';
revoke all on function internal.enqueue_lock_key() from public;

create or replace function internal.notify_task_inserted() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _waiting bigint;
    _window integer;
    _now bigint;
    _until bigint;
begin
    -- Held until this transaction ends: a worker going idle sees this enqueue in flight.
    perform pg_advisory_xact_lock_shared(internal.enqueue_lock_key());
    _waiting := pg_sequence_last_value('internal.task_waiter_seq');
    if _waiting is null or _waiting <= coalesce(pg_sequence_last_value('internal.task_woken_seq'), 0) then
        return null; -- no worker waits, or an enqueue since it began to wait has woken it
    end if;
    _window := queues.notify_coalesce_ms();
    if _window > 0 then
        _now := (extract(epoch from clock_timestamp()) * 1000)::bigint;
        _until := (select last_value from internal.task_notify_clock);
        -- A stamp further ahead than one window means the clock went back: notify, and restart.
        if _now < _until and _until - _now <= _window then
            return null;
        end if;
        perform setval('internal.task_notify_clock', _now + _window);
    end if;
    perform setval('internal.task_woken_seq', _waiting);
    perform pg_notify('taskorch_task', '');
    return null;
end $$;

create function queues.worker_waiting() returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _clear boolean := false;
begin
    perform nextval('internal.task_waiter_seq');
    -- The lock is taken in a block that always fails, so that it is released at once: a lock
    -- taken after a savepoint is released when the savepoint is rolled back.
    begin
        _clear := pg_try_advisory_xact_lock(internal.enqueue_lock_key());
        raise sqlstate 'TOW01';
    exception when sqlstate 'TOW01' then
        null;
    end;
    return _clear;
end $$;
comment on function queues.worker_waiting() is
    'Called by a worker about to wait for NOTIFY taskorch_task, before its last claim: the next enqueue notifies. False when an enqueue that began before the call is still in flight (its task may commit after the claim without a notification: poll). docs/worker.md, "The loop".';
revoke all on function queues.worker_waiting() from public;
grant execute on function queues.worker_waiting() to worker_service_user;

-- 2. The insert ------------------------------------------------------------------------------

-- The same rule as internal.time_in_range for each time, in one expression without a function
-- call: the range contains every time, and a NULL time makes the ALL NULL, which a CHECK accepts
-- (it fails only on false). A short expression, too: PostgreSQL reads a table's CHECK
-- expressions anew for every statement that writes it, and 20 comparisons read three times
-- slower than the ten calls they replace.
alter table queues.task drop constraint task_times_finite,
    add constraint task_times_finite check (
        '[0001-01-01 00:00:00+00,10000-01-01 00:00:00+00)'::tstzrange @> all (array[
            enqueued_at, scheduled_at, run_at, lease_expires_at, claimed_at, completed_at, failed_at,
            dead_at, cancelled_at, dispatched_at]));
comment on constraint task_times_finite on queues.task is
    'Every time is NULL or within the years 1 to 9999 (the rule of internal.time_in_range, without a function call per time).';

create or replace function queues.insert_task(_task_type text, _payload jsonb, _scheduled_at timestamptz default now(),
                                              _priority integer default 0, _idempotency_key text default null,
                                              _max_attempts integer default null)
returns table (task_id bigint, duplicate boolean)
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _id bigint;
    _dup boolean := false;
begin
    -- Every rule in one test; the functions that word the error run only when one is broken.
    if _task_type is null or _task_type !~ '^[A-Za-z][A-Za-z0-9_.:-]*$' or length(_task_type) > 128
       or _payload is null or jsonb_typeof(_payload) <> 'object' or pg_column_size(_payload) > 8388608
       or _max_attempts < 1 or length(_idempotency_key) not between 1 and 512
       or _scheduled_at < '0001-01-01 00:00:00+00' or _scheduled_at >= '10000-01-01 00:00:00+00' then
        perform internal.check_task_input(_task_type, _payload, _max_attempts, _idempotency_key);
        perform internal.check_finite('enqueue', '_scheduled_at', _scheduled_at);
    end if;
    _scheduled_at := coalesce(_scheduled_at, now());

    if _idempotency_key is null then
        insert into queues.task (task_type, payload, priority, scheduled_at, run_at, max_attempts)
        values (_task_type, _payload, coalesce(_priority, 0), _scheduled_at, _scheduled_at,
                coalesce(_max_attempts, queues.default_max_attempts()))
        returning queues.task.task_id into _id;
    else
        -- With a key: insert, or find the task that holds it. The loop covers the rare case where
        -- the holder disappears (rolled back or pruned) between the two statements.
        for _i in 1..3 loop
            insert into queues.task (task_type, payload, priority, idempotency_key, scheduled_at, run_at, max_attempts)
            values (_task_type, _payload, coalesce(_priority, 0), _idempotency_key, _scheduled_at, _scheduled_at,
                    coalesce(_max_attempts, queues.default_max_attempts()))
            on conflict (task_type, idempotency_key) where idempotency_key is not null do nothing
            returning queues.task.task_id into _id;
            exit when _id is not null;

            select t.task_id into _id
            from queues.task t
            where t.task_type = _task_type and t.idempotency_key = _idempotency_key;
            if _id is not null then
                _dup := true;
                exit;
            end if;
        end loop;
        if _id is null then
            raise exception 'enqueue: could not insert or find the task with idempotency key %', quote_literal(_idempotency_key)
                using errcode = 'serialization_failure';
        end if;
    end if;
    if _task_type in ('db_function', 'email', 'sms', 'file_delete') then
        perform internal.drop_enqueue_permits();
    end if;
    task_id := _id;
    duplicate := _dup;
    return next;
end $$;

-- The batch: the time check inline (internal.time_in_range, an SQL function with a SET clause, is
-- not inlined: a call per task).
create or replace function queues.insert_tasks(_task_types text[], _payloads jsonb[], _scheduled_ats timestamptz[] default null,
                                               _priorities integer[] default null, _idempotency_keys text[] default null,
                                               _max_attempts integer[] default null)
returns table (task_id bigint, duplicate boolean)
language plpgsql security definer set search_path = pg_catalog, pg_temp as $_$
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
    select u.ord, u.task_type, u.payload, u.max_attempts, u.idempotency_key, u.scheduled_at into _bad
    from unnest(_task_types, _payloads,
                coalesce(_max_attempts, array_fill(null::integer, array[_n])),
                coalesce(_idempotency_keys, array_fill(null::text, array[_n])),
                coalesce(_scheduled_ats, array_fill(null::timestamptz, array[_n])))
         with ordinality as u(task_type, payload, max_attempts, idempotency_key, scheduled_at, ord)
    where u.task_type is null
       or u.task_type !~ '^[A-Za-z][A-Za-z0-9_.:-]*$' or length(u.task_type) > 128
       or u.payload is null or jsonb_typeof(u.payload) <> 'object'
       or u.max_attempts < 1
       or length(u.idempotency_key) not between 1 and 512
       or pg_column_size(u.payload) > internal.max_payload_bytes()
       or u.scheduled_at < '0001-01-01 00:00:00+00' or u.scheduled_at >= '10000-01-01 00:00:00+00'
    order by u.ord
    limit 1;
    if found then
        perform internal.check_task_input(_bad.task_type, _bad.payload, _bad.max_attempts, _bad.idempotency_key,
                                          format('task %s of %s', _bad.ord, _n));
        perform internal.check_finite(format('enqueue_many: task %s of %s', _bad.ord, _n), '_scheduled_ats', _bad.scheduled_at);
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
        if _task_types && array['db_function', 'email', 'sms', 'file_delete'] then
            perform internal.drop_enqueue_permits();
        end if;
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
    if _task_types && array['db_function', 'email', 'sms', 'file_delete'] then
        perform internal.drop_enqueue_permits();
    end if;
    return query select r.id, r.dup from unnest(_ids, _dups) with ordinality as r(id, dup, ord) order by r.ord;
end $_$;
