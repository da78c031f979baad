-- The trust boundary (docs/security.md, "Who may name a function" and "The audit").
--
-- 1. Every time the API takes is finite, and within the years 1 to 9999. `infinity` and
--    `-infinity` are valid timestamptz values; a task enqueued at `-infinity` was claimed first and
--    then could not be read by the worker, which lost the whole claim with it, and a year such as
--    4713 BC broke every client that reads dates as ISO 8601 (Go's JSON among them). The enqueue
--    functions, snooze_task and add_schedule refuse them (22023, naming the argument), and CHECK
--    constraints on queues.task and queues.schedule refuse them whatever path writes the row.
--    Rows already holding one are repaired first: a task due before year 1 is due at its enqueue
--    time, one due after 9999 (it would never run) is failed with a message that says why; a
--    schedule's out-of-range next run is recomputed by the leader.
--
-- 2. A task may name a function only if the role enqueueing it may execute that function itself.
--    A db_function task's function and a channel task's handlers run with the worker's rights, and
--    the worker may execute every supervisor and handler: before this, a role allowed to enqueue
--    could have the worker record an "e-mail sent" fact for an e-mail never sent. Now:
--    - the enqueue functions are SECURITY INVOKER: they run as their caller, and first ask for a
--      *permit* for the functions their tasks name (queues.permit_task_functions), inserting into
--      queues.enqueue_permit as the caller. That table's trigger runs as the caller too, and refuses
--      (42501) a function the caller may not execute;
--    - they then call the functions that insert the tasks (queues.insert_task, insert_tasks,
--      insert_debounced_task; SECURITY DEFINER, what the enqueue functions were before), and a
--      trigger on queues.task refuses a task naming a function for which no permit was given in
--      the same transaction; the insert functions then drop the transaction's permits;
--    - a kickoff or a supervisor is SECURITY DEFINER: it enqueues as its owner, who may execute the
--      process's functions; an application calling queues.enqueue directly enqueues as itself.
--    Schedules get the same check when they are added (queues.add_schedule, put_schedule).
--    Roles that could enqueue keep their rights: they are granted what the invoker functions call.
--    queues.grant_enqueue(role) grants all of it to a new role.
--
-- 3. A function named by a task must exist and be well formed when the task is enqueued: a
--    malformed name or a missing function is refused at once (22023, 42883) instead of failing the
--    task later.

-- 1. Finite times ------------------------------------------------------------------------------

-- A time the system can hold and every client can read: finite, and within years 1 to 9999
-- (what ISO 8601 dates, Go's time.Time JSON and most languages' date types read). NULL is fine.
create function internal.time_in_range(_t timestamptz) returns boolean
language sql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
    select _t is null or (_t >= '0001-01-01 00:00:00+00' and _t < '10000-01-01 00:00:00+00')
$$;
revoke all on function internal.time_in_range(timestamptz) from public;

create function internal.check_finite(_label text, _arg text, _value timestamptz) returns void
language plpgsql immutable set search_path = pg_catalog, pg_temp as $$
begin
    if not internal.time_in_range(_value) then
        raise exception '%: % must be a finite time between the years 1 and 9999, got %', _label, _arg, _value
            using errcode = 'invalid_parameter_value';
    end if;
end $$;
revoke all on function internal.check_finite(text, text, timestamptz) from public;

-- Repair rows that hold a time out of range, then constrain.
insert into queues.error (task_id, error_message, context)
select t.task_id,
       format('task scheduled at %s can never run: failed by the upgrade to finite times (core/0035)', t.run_at),
       jsonb_build_object('operation', 'migrate', 'reason', 'infinite_time', 'run_at', t.run_at::text)
from queues.task t
where t.status = 'pending' and t.run_at >= '10000-01-01 00:00:00+00';

update queues.task t
set status = 'failed', failed_at = now(),
    last_error = format('task scheduled at %s can never run: failed by the upgrade to finite times (core/0035)', t.run_at),
    run_at = case when internal.time_in_range(t.enqueued_at) then t.enqueued_at else now() end,
    scheduled_at = case when internal.time_in_range(t.scheduled_at) then t.scheduled_at else now() end
where t.status = 'pending' and t.run_at >= '10000-01-01 00:00:00+00';

update queues.task t
set enqueued_at = case when internal.time_in_range(t.enqueued_at) then t.enqueued_at else now() end,
    scheduled_at = case when internal.time_in_range(t.scheduled_at) then t.scheduled_at
                        when internal.time_in_range(t.enqueued_at) then t.enqueued_at else now() end,
    run_at = case when internal.time_in_range(t.run_at) then t.run_at
                  when internal.time_in_range(t.enqueued_at) then t.enqueued_at else now() end,
    lease_expires_at = case when internal.time_in_range(t.lease_expires_at) then t.lease_expires_at else now() end,
    claimed_at = case when internal.time_in_range(t.claimed_at) then t.claimed_at else now() end,
    completed_at = case when internal.time_in_range(t.completed_at) then t.completed_at else now() end,
    failed_at = case when internal.time_in_range(t.failed_at) then t.failed_at else now() end,
    dead_at = case when internal.time_in_range(t.dead_at) then t.dead_at else now() end,
    cancelled_at = case when internal.time_in_range(t.cancelled_at) then t.cancelled_at else now() end,
    dispatched_at = case when internal.time_in_range(t.dispatched_at) then t.dispatched_at else now() end
where not (internal.time_in_range(t.enqueued_at) and internal.time_in_range(t.scheduled_at) and internal.time_in_range(t.run_at)
           and internal.time_in_range(t.lease_expires_at) and internal.time_in_range(t.claimed_at)
           and internal.time_in_range(t.completed_at) and internal.time_in_range(t.failed_at)
           and internal.time_in_range(t.dead_at) and internal.time_in_range(t.cancelled_at)
           and internal.time_in_range(t.dispatched_at));

alter table queues.task add constraint task_times_finite check (
    internal.time_in_range(enqueued_at) and internal.time_in_range(scheduled_at) and internal.time_in_range(run_at)
    and internal.time_in_range(lease_expires_at) and internal.time_in_range(claimed_at)
    and internal.time_in_range(completed_at) and internal.time_in_range(failed_at)
    and internal.time_in_range(dead_at) and internal.time_in_range(cancelled_at)
    and internal.time_in_range(dispatched_at)
) not valid;
alter table queues.task validate constraint task_times_finite;

update queues.schedule
set next_run_at = case when internal.time_in_range(next_run_at) then next_run_at end,
    last_tick_at = case when internal.time_in_range(last_tick_at) then last_tick_at end,
    last_enqueued_at = case when internal.time_in_range(last_enqueued_at) then last_enqueued_at end
where not (internal.time_in_range(next_run_at) and internal.time_in_range(last_tick_at)
           and internal.time_in_range(last_enqueued_at));
alter table queues.schedule add constraint schedule_times_finite check (
    internal.time_in_range(created_at) and internal.time_in_range(updated_at) and internal.time_in_range(next_run_at)
    and internal.time_in_range(last_tick_at) and internal.time_in_range(last_enqueued_at)
);

create or replace function queues.snooze_task(_task_id bigint, _lease_id bigint, _run_at timestamptz)
returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
begin
    perform internal.check_finite('snooze_task', '_run_at', _run_at);
    update queues.task
    set status = 'pending', run_at = coalesce(_run_at, clock_timestamp()), lease_expires_at = null,
        attempt = greatest(attempt - 1, 0)
    where task_id = _task_id and lease_id = _lease_id and lease_expires_at is not null  -- i.e. running
    returning * into _t;
    if not found then
        return false;
    end if;
    insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
    values (_task_id, 'snoozed', 'running', 'pending', _lease_id, _t.worker_id, _t.attempt + 1,
            'until ' || _t.run_at::text);
    return true;
end $$;

-- 2. Permits -----------------------------------------------------------------------------------

-- One row per call of an enqueue function whose tasks name functions: the names, checked against
-- the caller's rights by the insert trigger, valid for the rest of the transaction until the task
-- insert that uses them drops them. Unlogged: a permit outlives no transaction, so none needs to
-- survive a crash.
create unlogged table queues.enqueue_permit (
    permit_xid xid8 not null,
    names text[] not null,
    granted_to name not null,
    created_at timestamptz not null default clock_timestamp()
);
create index enqueue_permit_xid_idx on queues.enqueue_permit (permit_xid);
comment on table queues.enqueue_permit is
    'Functions a task may name in the current transaction, each checked against the rights of the role that asked (docs/security.md, "Who may name a function"). Written by queues.permit_task_functions, read and emptied by the task inserts.';
revoke all on table queues.enqueue_permit from public;

-- The names a task would have the worker call: a db_function task's function, a channel task's
-- handlers. Shapes that cannot be run are refused here, with the label of the caller.
create function internal.task_function_names(_label text, _task_type text, _payload jsonb)
returns text[]
language plpgsql immutable set search_path = pg_catalog, pg_temp as $$
declare
    _names text[] := '{}';
    _key text;
    _v jsonb;
begin
    if _task_type = 'db_function' then
        _v := _payload -> 'db_function';
        if _v is null or jsonb_typeof(_v) <> 'string' or (_v #>> '{}') = '' then
            raise exception '%: a db_function task''s payload must name its function as a string, {"db_function": "schema.name", ...}; got %',
                _label, coalesce(left(_v::text, 100), 'no "db_function" field')
                using errcode = 'invalid_parameter_value';
        end if;
        return array[_v #>> '{}'];
    end if;
    if _task_type not in ('email', 'sms', 'file_delete') then
        return _names;
    end if;
    foreach _key in array array['before_handler', 'success_handler', 'error_handler'] loop
        _v := _payload -> _key;
        continue when _v is null or jsonb_typeof(_v) = 'null';
        if jsonb_typeof(_v) <> 'string' or (_v #>> '{}') = '' then
            raise exception '%: a % task''s "%" must name a function as a string, "schema.name"; got %',
                _label, _task_type, _key, left(_v::text, 100)
                using errcode = 'invalid_parameter_value';
        end if;
        _names := _names || (_v #>> '{}');
    end loop;
    return _names;
end $$;
revoke all on function internal.task_function_names(text, text, jsonb) from public;

-- The permit's check. SECURITY INVOKER, as its trigger: it runs as the role inserting the permit,
-- whose rights are the ones checked. It calls only pg_catalog: the caller has no USAGE on internal.
create function internal.check_enqueue_permit() returns trigger
language plpgsql security invoker set search_path = pg_catalog, pg_temp as $_$
declare
    _name text;
    _parts text[];
    _nsp oid;
    _fn oid;
begin
    new.permit_xid := pg_current_xact_id();
    new.granted_to := current_user;
    new.created_at := clock_timestamp();
    if new.names is null or cardinality(new.names) = 0 or array_position(new.names, null) is not null then
        raise exception 'enqueue: a permit names one or more functions, got %', coalesce(new.names::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    foreach _name in array new.names loop
        _parts := null;
        if length(_name) <= 127 then
            _parts := regexp_match(_name, '^([a-z_][a-z0-9_$]*)[.]([a-z_][a-z0-9_$]*)$');
        end if;
        if _parts is null or length(_parts[1]) > 63 or length(_parts[2]) > 63 then
            raise exception 'enqueue: function name % is malformed: expected schema.name, two lowercase SQL identifiers ([a-z_][a-z0-9_$]*, at most 63 characters each) without quotes, spaces or arguments',
                to_jsonb(left(_name, 100))::text
                using errcode = 'invalid_parameter_value';
        end if;
        select n.oid into _nsp from pg_catalog.pg_namespace n where n.nspname = _parts[1];
        _fn := null;
        if _nsp is not null then
            select p.oid into _fn from pg_catalog.pg_proc p
            where p.pronamespace = _nsp and p.proname = _parts[2]
              and p.proargtypes = '3802'::pg_catalog.oidvector;  -- exactly one jsonb argument
        end if;
        if _fn is null then
            raise exception 'enqueue: function %(jsonb) does not exist: a task can name only an existing function taking one jsonb argument',
                format('%I.%I', _parts[1], _parts[2])
                using errcode = 'undefined_function';
        end if;
        if not has_schema_privilege(current_user, _nsp, 'usage') or not has_function_privilege(current_user, _fn, 'execute') then
            raise exception 'enqueue: role % may not enqueue a task naming %: it may not execute that function itself',
                current_user, _fn::regprocedure
                using errcode = 'insufficient_privilege',
                      detail = 'A db_function task''s function and a channel task''s handlers run with the worker''s rights; a task may name only a function the role enqueueing it may execute (docs/security.md, "Who may name a function").',
                      hint = 'Enqueue it from a function that runs as a role allowed to (a SECURITY DEFINER kickoff), or grant execute on the function to this role.';
        end if;
    end loop;
    return new;
end $_$;
revoke all on function internal.check_enqueue_permit() from public;

create trigger enqueue_permit_check before insert on queues.enqueue_permit
for each row execute function internal.check_enqueue_permit();

-- The table's own check: a task that names a function needs a permit for it, given in the same
-- transaction. Fires only for the task types whose payload names functions.
create function internal.check_task_functions() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _names text[];
    _missing text;
begin
    _names := internal.task_function_names('enqueue', new.task_type, new.payload);
    if cardinality(_names) = 0 then
        return new;
    end if;
    select n into _missing
    from unnest(_names) n
    where not exists (select from queues.enqueue_permit p
                      where p.permit_xid = pg_current_xact_id() and n = any (p.names))
    limit 1;
    if found then
        raise exception 'enqueue: the % task names function %, which no role allowed to execute it asked to enqueue in this transaction',
            new.task_type, to_jsonb(left(_missing, 130))::text
            using errcode = 'insufficient_privilege',
                  hint = 'Enqueue through queues.enqueue and its siblings, whose caller must be allowed to execute every function its tasks name (docs/security.md, "Who may name a function").';
    end if;
    return new;
end $$;
revoke all on function internal.check_task_functions() from public;

create trigger task_functions_permitted
before insert or update of task_type, payload on queues.task
for each row
when (new.task_type in ('db_function', 'email', 'sms', 'file_delete'))
execute function internal.check_task_functions();

create trigger schedule_functions_permitted
before insert or update of task_type, payload on queues.schedule
for each row
when (new.task_type in ('db_function', 'email', 'sms', 'file_delete'))
execute function internal.check_task_functions();

-- Asks for the permit the tasks need: one row naming every distinct function they name. Runs as
-- its caller (the enqueue functions call it), so the check is against the caller's rights. A
-- malformed shape is left to the insert, which says what is wrong with it.
create function queues.permit_task_functions(_task_types text[], _payloads jsonb[]) returns void
language plpgsql security invoker set search_path = pg_catalog, pg_temp as $$
declare
    _names text[];
begin
    select array_agg(distinct v.name order by v.name) into _names
    from unnest(_task_types, _payloads) as u(task_type, payload)
    cross join lateral (
        select u.payload ->> 'db_function' as name
        where u.task_type = 'db_function' and jsonb_typeof(u.payload -> 'db_function') = 'string'
        union all
        select u.payload ->> k
        from unnest(array['before_handler', 'success_handler', 'error_handler']) k
        where u.task_type in ('email', 'sms', 'file_delete') and jsonb_typeof(u.payload -> k) = 'string'
    ) v
    where v.name <> '';
    if _names is not null then
        insert into queues.enqueue_permit (permit_xid, names, granted_to) values (pg_current_xact_id(), _names, current_user);
    end if;
end $$;
revoke all on function queues.permit_task_functions(text[], jsonb[]) from public;
comment on function queues.permit_task_functions(text[], jsonb[]) is
    'Asks, as the caller, for a permit for the functions these tasks name; refused (42501) for a function the caller may not execute. The enqueue functions call it.';

-- Drops the current transaction's permits: the insert functions call it once their tasks are in.
create function internal.drop_enqueue_permits() returns void
language sql security definer set search_path = pg_catalog, pg_temp as $$
    delete from queues.enqueue_permit where permit_xid = pg_current_xact_id()
$$;
revoke all on function internal.drop_enqueue_permits() from public;

-- The insert functions: what the enqueue functions were, under new names (their grants follow
-- them), with finite times.
alter function queues.enqueue_with_result(text, jsonb, timestamptz, integer, text, integer) rename to insert_task;
alter function queues.enqueue_many_with_result(text[], jsonb[], timestamptz[], integer[], text[], integer[]) rename to insert_tasks;
alter function queues.enqueue_debounced(text, jsonb, text, interval, integer, integer) rename to insert_debounced_task;
alter function queues.add_schedule(text, text, text, jsonb, integer, integer, boolean, timestamptz) rename to put_schedule;

create or replace function queues.insert_task(
    _task_type text,
    _payload jsonb,
    _scheduled_at timestamptz default now(),
    _priority integer default 0,
    _idempotency_key text default null,
    _max_attempts integer default null)
returns table (task_id bigint, duplicate boolean)
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _id bigint;
    _dup boolean := false;
begin
    perform internal.check_task_input(_task_type, _payload, _max_attempts, _idempotency_key);
    perform internal.check_finite('enqueue', '_scheduled_at', _scheduled_at);
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
    return query select _id, _dup;
end $$;

create or replace function queues.insert_tasks(
    _task_types text[],
    _payloads jsonb[],
    _scheduled_ats timestamptz[] default null,
    _priorities integer[] default null,
    _idempotency_keys text[] default null,
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
       or not internal.time_in_range(u.scheduled_at)
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

create or replace function queues.insert_debounced_task(
    _task_type text,
    _payload jsonb,
    _debounce_key text,
    _delay interval,
    _priority integer default 0,
    _max_attempts integer default null)
returns table (task_id bigint, debounced boolean)
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    _new bigint := nextval('queues.task_task_id_seq'::regclass);
    _id bigint;
    _run_at timestamptz;
begin
    perform internal.check_task_input(_task_type, _payload, _max_attempts, null, 'enqueue_debounced');
    if _debounce_key is null or length(_debounce_key) not between 1 and 512 then
        raise exception 'enqueue_debounced: the debounce key must be 1 to 512 characters, got %',
            coalesce(length(_debounce_key)::text, 'NULL') using errcode = 'invalid_parameter_value';
    end if;
    if _delay is null or _delay < interval '0' or _delay > interval '1 year' then
        raise exception 'enqueue_debounced: the delay must be between 0 and 1 year, got %', coalesce(_delay::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    _run_at := now() + _delay;

    insert into queues.task as t (task_id, task_type, payload, priority, scheduled_at, run_at, max_attempts, debounce_key)
    values (_new, _task_type, _payload, coalesce(_priority, 0), _run_at, _run_at,
            coalesce(_max_attempts, queues.default_max_attempts()), _debounce_key)
    on conflict (task_type, debounce_key) where status = 'pending' and debounce_key is not null
    do update set payload = excluded.payload, priority = excluded.priority,
                  scheduled_at = excluded.scheduled_at, run_at = excluded.run_at
    returning t.task_id into _id;

    if _id <> _new then
        -- The payload changed: so may the task's limit bucket (0016).
        update queues.task t
        set limit_name = l.task_type,
            limit_key = case when l.task_type is not null then internal.limit_key(l.key_field, _payload) end
        from (select * from internal.limit_of(_task_type, _payload)) l
        where t.task_id = _id and (t.limit_name is not null or l.task_type is not null);
        insert into queues.task_event (task_id, event, from_status, to_status, detail)
        values (_id, 'debounced', 'pending', 'pending', 'enqueued again; runs at ' || _run_at::text);
    end if;
    if _task_type in ('db_function', 'email', 'sms', 'file_delete') then
        perform internal.drop_enqueue_permits();
    end if;
    return query select _id, _id <> _new;
end $$;

create or replace function queues.put_schedule(
    _name text,
    _cron text,
    _task_type text,
    _payload jsonb default '{}',
    _priority integer default 0,
    _max_attempts integer default null,
    _enabled boolean default true,
    _next_run_at timestamptz default null)
returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $_$
declare
    _fields text[];
    _created boolean;
begin
    if _name is null or _name !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$' or length(_name) > 128 then
        raise exception 'add_schedule: name % is malformed: use 1 to 128 letters, digits, "_", ".", ":" or "-", starting with a letter or digit',
            coalesce(quote_literal(left(_name, 140)), 'NULL') using errcode = 'invalid_parameter_value';
    end if;
    perform internal.check_task_input(_task_type, coalesce(_payload, '{}'::jsonb), _max_attempts, null, 'add_schedule');
    perform internal.check_finite('add_schedule', '_next_run_at', _next_run_at);
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
    if _task_type in ('db_function', 'email', 'sms', 'file_delete') then
        perform internal.drop_enqueue_permits();
    end if;
    return _created;
end $_$;

-- The enqueue functions, as their callers: a permit for what the tasks name, then the insert.
create or replace function queues.enqueue_with_result(
    _task_type text,
    _payload jsonb,
    _scheduled_at timestamptz default now(),
    _priority integer default 0,
    _idempotency_key text default null,
    _max_attempts integer default null)
returns table (task_id bigint, duplicate boolean)
language plpgsql security invoker set search_path = pg_catalog, pg_temp as $$
begin
    if _task_type in ('db_function', 'email', 'sms', 'file_delete') then
        perform queues.permit_task_functions(array[_task_type], array[_payload]);
    end if;
    return query select * from queues.insert_task(_task_type, _payload, _scheduled_at, _priority, _idempotency_key, _max_attempts);
end $$;

create or replace function queues.enqueue(
    _task_type text,
    _payload jsonb,
    _scheduled_at timestamptz default now(),
    _priority integer default 0,
    _idempotency_key text default null,
    _max_attempts integer default null)
returns bigint
language plpgsql security invoker set search_path = pg_catalog, pg_temp as $$
declare
    _id bigint;
begin
    if _task_type in ('db_function', 'email', 'sms', 'file_delete') then
        perform queues.permit_task_functions(array[_task_type], array[_payload]);
    end if;
    select r.task_id into _id
    from queues.insert_task(_task_type, _payload, _scheduled_at, _priority, _idempotency_key, _max_attempts) r;
    return _id;
end $$;

create or replace function queues.enqueue_many_with_result(
    _task_types text[],
    _payloads jsonb[],
    _scheduled_ats timestamptz[] default null,
    _priorities integer[] default null,
    _idempotency_keys text[] default null,
    _max_attempts integer[] default null)
returns table (task_id bigint, duplicate boolean)
language plpgsql security invoker set search_path = pg_catalog, pg_temp as $$
begin
    if _task_types && array['db_function', 'email', 'sms', 'file_delete'] then
        perform queues.permit_task_functions(_task_types, _payloads);
    end if;
    return query select * from queues.insert_tasks(_task_types, _payloads, _scheduled_ats, _priorities,
                                                   _idempotency_keys, _max_attempts);
end $$;

create or replace function queues.enqueue_many(
    _task_types text[],
    _payloads jsonb[],
    _scheduled_ats timestamptz[] default null,
    _priorities integer[] default null,
    _idempotency_keys text[] default null,
    _max_attempts integer[] default null)
returns bigint[]
language plpgsql security invoker set search_path = pg_catalog, pg_temp as $$
begin
    if _task_types && array['db_function', 'email', 'sms', 'file_delete'] then
        perform queues.permit_task_functions(_task_types, _payloads);
    end if;
    return (select coalesce(array_agg(r.task_id order by r.ord), '{}')
            from queues.insert_tasks(_task_types, _payloads, _scheduled_ats, _priorities,
                                     _idempotency_keys, _max_attempts) with ordinality as r(task_id, duplicate, ord));
end $$;

create or replace function queues.enqueue_debounced(
    _task_type text,
    _payload jsonb,
    _debounce_key text,
    _delay interval,
    _priority integer default 0,
    _max_attempts integer default null)
returns table (task_id bigint, debounced boolean)
language plpgsql security invoker set search_path = pg_catalog, pg_temp as $$
begin
    if _task_type in ('db_function', 'email', 'sms', 'file_delete') then
        perform queues.permit_task_functions(array[_task_type], array[_payload]);
    end if;
    return query select * from queues.insert_debounced_task(_task_type, _payload, _debounce_key, _delay, _priority, _max_attempts);
end $$;

create or replace function queues.add_schedule(
    _name text,
    _cron text,
    _task_type text,
    _payload jsonb default '{}',
    _priority integer default 0,
    _max_attempts integer default null,
    _enabled boolean default true,
    _next_run_at timestamptz default null)
returns boolean
language plpgsql security invoker set search_path = pg_catalog, pg_temp as $$
begin
    if _task_type in ('db_function', 'email', 'sms', 'file_delete') then
        perform queues.permit_task_functions(array[_task_type], array[coalesce(_payload, '{}'::jsonb)]);
    end if;
    return queues.put_schedule(_name, _cron, _task_type, _payload, _priority, _max_attempts, _enabled, _next_run_at);
end $$;

revoke all on function queues.enqueue_with_result(text, jsonb, timestamptz, integer, text, integer) from public;
revoke all on function queues.enqueue_many_with_result(text[], jsonb[], timestamptz[], integer[], text[], integer[]) from public;
revoke all on function queues.enqueue_debounced(text, jsonb, text, interval, integer, integer) from public;
revoke all on function queues.add_schedule(text, text, text, jsonb, integer, integer, boolean, timestamptz) from public;

-- A supervisor's tick is inserted by its owner's code directly: it asks for its permit first.
create or replace function internal.schedule_supervisor_tick(_supervisor text, _at timestamptz) returns void
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _key text := internal.supervisor_tick_key(_supervisor);
begin
    _at := coalesce(_at, now());
    -- A process started "at -infinity" would otherwise stop at the table's constraint.
    perform internal.check_finite('schedule_supervisor_tick', 'the time a process is due (_at, a kickoff''s _scheduled_at)', _at);
    if exists (select 1 from queues.task
               where task_type = 'db_function' and debounce_key = _key and status = 'pending' and run_at <= _at) then
        return;
    end if;
    perform queues.permit_task_functions(array['db_function'], array[jsonb_build_object('db_function', _supervisor)]);
    insert into queues.task as t (task_type, payload, scheduled_at, run_at, max_attempts, debounce_key)
    values ('db_function', jsonb_build_object('db_function', _supervisor, 'tick', true), _at, _at,
            queues.default_max_attempts(), _key)
    on conflict (task_type, debounce_key) where status = 'pending' and debounce_key is not null
    do update set run_at = excluded.run_at, scheduled_at = excluded.scheduled_at
        where t.run_at > excluded.run_at;
    perform internal.drop_enqueue_permits();
    -- A moved tick is not an insert: wake the workers as the insert trigger would.
    perform pg_notify('taskorch_task', '');
end $$;

-- Grants. Everything an enqueueing role needs, in one call, for new roles (docs/security.md).
create function queues.grant_enqueue(_role regrole) returns void
language plpgsql security invoker set search_path = pg_catalog, pg_temp as $$
begin
    if _role is null then
        raise exception 'grant_enqueue: role must not be null' using errcode = 'invalid_parameter_value';
    end if;
    execute format('grant usage on schema queues to %s', _role);
    execute format('grant execute on function
        queues.enqueue(text, jsonb, timestamptz, integer, text, integer),
        queues.enqueue_with_result(text, jsonb, timestamptz, integer, text, integer),
        queues.enqueue_many(text[], jsonb[], timestamptz[], integer[], text[], integer[]),
        queues.enqueue_many_with_result(text[], jsonb[], timestamptz[], integer[], text[], integer[]),
        queues.enqueue_debounced(text, jsonb, text, interval, integer, integer),
        queues.insert_task(text, jsonb, timestamptz, integer, text, integer),
        queues.insert_tasks(text[], jsonb[], timestamptz[], integer[], text[], integer[]),
        queues.insert_debounced_task(text, jsonb, text, interval, integer, integer),
        queues.permit_task_functions(text[], jsonb[]) to %s', _role);
    execute format('grant insert on table queues.enqueue_permit to %s', _role);
end $$;
revoke all on function queues.grant_enqueue(regrole) from public;
comment on function queues.grant_enqueue(regrole) is
    'Grants a role what enqueueing takes: the enqueue functions, the insert functions they call, and the permit they ask for. Run as the schema owner.';

-- Roles granted an enqueue function or add_schedule before this migration keep their rights: the
-- renamed insert functions kept their grants; the invoker functions, the permit and the other
-- insert functions are granted to the same roles.
do $$
declare
    _r record;
begin
    for _r in
        select distinct a.grantee::regrole as role, p.proname
        from pg_catalog.pg_proc p
        cross join lateral aclexplode(p.proacl) a
        where p.pronamespace = 'queues'::regnamespace
          and p.proname in ('enqueue', 'enqueue_many', 'insert_task', 'insert_tasks', 'insert_debounced_task', 'put_schedule')
          and a.privilege_type = 'EXECUTE'
          and a.grantee <> 0                 -- PUBLIC
          and a.grantee <> p.proowner
    loop
        if _r.proname = 'put_schedule' then
            execute format('grant execute on function queues.add_schedule(text, text, text, jsonb, integer, integer, boolean, timestamptz), queues.permit_task_functions(text[], jsonb[]) to %s', _r.role);
            execute format('grant insert on table queues.enqueue_permit to %s', _r.role);
        else
            perform queues.grant_enqueue(_r.role);
        end if;
    end loop;
end $$;
