-- Signals: events from the outside world, recorded once as facts, and tasks that wait for them
-- (docs/processes.md, "Waiting for the outside world"; docs/sql.md, "Signals").
--
--   queues.signal(name, key, payload)        app/operator: record an event; the first emit wins
--   queues.wait_for_signal(name, key, task)  make a pending task due the moment the event arrives
--   queues.signal_payload(name, key)         facts helper: the event's payload, NULL until it arrives
--
-- A supervisor that waits enqueues its next run at its deadline and registers that task with
-- wait_for_signal in the same transaction. queues.signal records the event and, in its own
-- transaction, makes every registered task that is still pending due now and wakes the workers
-- (NOTIFY taskorch_task, as queues.retry_task does). Without a signal the task runs at its
-- deadline and signal_payload says NULL: the supervisor's timeout branch.
--
-- Both functions take a transaction-scoped advisory lock on (name, key) before they look at the
-- other side, so a wait registered while the signal commits is never missed: whichever of the
-- two takes the lock second sees what the first committed (each statement of a read committed
-- transaction takes a new snapshot).

create table queues.signal (
    signal_id   bigint generated always as identity primary key,
    name        text not null,
    key         text not null,
    payload     jsonb not null default '{}',
    received_at timestamptz not null default now(),
    constraint signal_name_key unique (name, key),
    constraint signal_name_valid check (length(name) between 1 and 128),
    constraint signal_key_valid check (length(key) between 1 and 512),
    constraint signal_payload_is_object check (jsonb_typeof(payload) = 'object')
);
comment on table queues.signal is
    'Append-only: one row per external event (name, key), the first emit''s payload. Written by queues.signal.';

create trigger signal_append_only before update on queues.signal
    for each statement execute function internal.refuse_fact_update();

-- Pending tasks to make due when a signal arrives. queues.signal deletes the rows it acts on; a
-- task's rows go with the task (the pruner deletes finished tasks).
create table queues.signal_wait (
    name       text not null,
    key        text not null,
    task_id    bigint not null references queues.task (task_id) on delete cascade,
    created_at timestamptz not null default now(),
    primary key (name, key, task_id)
);
create index signal_wait_task_idx on queues.signal_wait (task_id);
comment on table queues.signal_wait is
    'Tasks registered by queues.wait_for_signal: made due now when signal (name, key) arrives.';

-- Validates a signal's name and key; raises 22023 with a message that says what is wrong.
create function internal.check_signal_key(_label text, _name text, _key text) returns void
language plpgsql immutable set search_path = pg_catalog, pg_temp as $$
begin
    if _name is null or _name = '' then
        raise exception '%: name must not be empty', _label using errcode = 'invalid_parameter_value';
    end if;
    if length(_name) > 128 then
        raise exception '%: name is % characters, over the limit of 128', _label, length(_name)
            using errcode = 'invalid_parameter_value';
    end if;
    if _key is null or _key = '' then
        raise exception '%: key must not be empty', _label using errcode = 'invalid_parameter_value';
    end if;
    if length(_key) > 512 then
        raise exception '%: key is % characters, over the limit of 512', _label, length(_key)
            using errcode = 'invalid_parameter_value';
    end if;
end $$;

-- The lock that orders queues.signal and queues.wait_for_signal on one (name, key).
create function internal.lock_signal(_name text, _key text) returns void
language sql volatile set search_path = pg_catalog, pg_temp as $$
    select pg_advisory_xact_lock(hashtext('taskorch.signal'), hashtext(_name || ':' || _key))
$$;

-- Makes pending tasks due now (those not due yet), records why in their history and wakes the
-- workers. Returns how many it moved.
create function internal.wake_signal_waiters(_task_ids bigint[], _name text, _key text) returns integer
language plpgsql volatile set search_path = pg_catalog, pg_temp as $$
declare
    _n integer;
begin
    with woken as (
        update queues.task t set run_at = now()
        where t.task_id = any (_task_ids) and t.status = 'pending' and t.run_at > now()
        returning t.task_id, t.attempt
    ), logged as (
        insert into queues.task_event (task_id, event, from_status, to_status, worker_id, attempt, detail)
        select w.task_id, 'signalled', 'pending', 'pending', session_user, w.attempt,
               format('made due by signal %s key %s', quote_literal(_name), quote_literal(left(_key, 140)))
        from woken w
        returning 1
    )
    select count(*)::integer into _n from logged;
    if _n > 0 then
        perform pg_notify('taskorch_task', '');
    end if;
    return _n;
end $$;

-- Records event (_name, _key) with _payload (a JSON object) once and makes the tasks waiting
-- for it due now. True when this call recorded it; false when it had arrived already (the first
-- emit's payload stays, nothing changes). Bad input raises 22023 and writes nothing.
create function queues.signal(_name text, _key text, _payload jsonb default '{}') returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _waiting bigint[];
begin
    perform internal.check_signal_key('signal', _name, _key);
    if _payload is null or jsonb_typeof(_payload) <> 'object' then
        raise exception 'signal: payload must be a JSON object, got %', coalesce(jsonb_typeof(_payload), 'null')
            using errcode = 'invalid_parameter_value';
    end if;
    if pg_column_size(_payload) > internal.max_payload_bytes() then
        raise exception 'signal: payload is % bytes, over the limit of % bytes (8 MiB) per signal',
            pg_column_size(_payload), internal.max_payload_bytes()
            using errcode = 'invalid_parameter_value',
                  hint = 'Store large data elsewhere (a table, object storage) and put its key in the payload.';
    end if;

    perform internal.lock_signal(_name, _key);
    insert into queues.signal (name, key, payload) values (_name, _key, _payload)
    on conflict (name, key) do nothing;
    if not found then
        return false;
    end if;

    with gone as (
        delete from queues.signal_wait w where w.name = _name and w.key = _key returning w.task_id
    )
    select array_agg(g.task_id) into _waiting from gone g;
    if _waiting is not null then
        perform internal.wake_signal_waiters(_waiting, _name, _key);
    end if;
    return true;
end $$;

-- Registers pending task _task_id to be made due the moment signal (_name, _key) arrives;
-- returns false. When the signal has arrived already, makes the task due now instead (if it is
-- not due yet) and returns true. Registering twice is harmless. A missing task raises P0002, a
-- task that is not pending 55000, bad input 22023.
create function queues.wait_for_signal(_name text, _key text, _task_id bigint) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _status queues.task_status;
begin
    perform internal.check_signal_key('wait_for_signal', _name, _key);
    if _task_id is null then
        raise exception 'wait_for_signal: task_id must not be null' using errcode = 'invalid_parameter_value';
    end if;

    perform internal.lock_signal(_name, _key);
    select t.status into _status from queues.task t where t.task_id = _task_id for update;
    if not found then
        raise exception 'wait_for_signal: task % does not exist', _task_id using errcode = 'no_data_found';
    end if;
    if _status <> 'pending' then
        raise exception 'wait_for_signal: task % is %; only a pending task can wait for a signal', _task_id, _status
            using errcode = 'object_not_in_prerequisite_state';
    end if;

    if exists (select from queues.signal s where s.name = _name and s.key = _key) then
        perform internal.wake_signal_waiters(array[_task_id], _name, _key);
        return true;
    end if;
    insert into queues.signal_wait (name, key, task_id) values (_name, _key, _task_id)
    on conflict do nothing;
    return false;
end $$;

-- The payload of signal (_name, _key), or NULL when it has not arrived: a supervisor's
-- "has X for K arrived?".
create function queues.signal_payload(_name text, _key text) returns jsonb
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select s.payload from queues.signal s where s.name = _name and s.key = _key
$$;

-- Grants: nothing here is executable by PUBLIC and the worker role gets none of it. Signals are
-- emitted by applications and operators, granted queues.signal by the operator like
-- queues.enqueue (docs/security.md). Supervisors are security definer db_functions, which call
-- wait_for_signal and signal_payload as their owner; a Go handler that waits needs them granted
-- to its role by the operator.
revoke all on table queues.signal, queues.signal_wait from public;
revoke all on function
    internal.check_signal_key(text, text, text),
    internal.lock_signal(text, text),
    internal.wake_signal_waiters(bigint[], text, text),
    queues.signal(text, text, jsonb),
    queues.wait_for_signal(text, text, bigint),
    queues.signal_payload(text, text)
from public;
