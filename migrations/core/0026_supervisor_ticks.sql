-- Supervisor ticks (docs/processes.md, "How a supervisor runs"). A process's supervisor runs as
-- one db_function task, its tick, that advances every due instance of the process in one
-- transaction, set-based; each instance says when it is next due in its process's <name>_due
-- table. At most one tick of a supervisor is pending at a time: the task's debounce_key is
-- 'tick:<supervisor>' (the pending-only unique index of 0017), and a wake-up moves the pending
-- tick earlier, never later.
--
-- No wake-up is lost. Whoever makes an instance due (a kickoff, a handler, a signal) calls
-- queues.wake_supervisor in the same transaction: it takes a shared advisory lock for the
-- supervisor until commit, then makes sure a tick is pending by then. A tick starts by trying
-- that lock exclusively (queues.supervisor_tick_clean): when it gets it, every transaction that
-- made an instance due before has committed, so the tick's next statement sees its rows; a
-- transaction that makes one due later finds no pending tick (this one is running) and
-- schedules the next. When it cannot get it, a wake-up is in flight that may have seen this
-- tick still pending: the tick schedules a follow-up itself.

-- PL/pgSQL rather than SQL here and below: a SQL function with a SET clause is not inlined and
-- is planned at every call; these run for every instance made due.
create function internal.supervisor_tick_key(_supervisor text) returns text
language plpgsql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
begin
    return 'tick:' || _supervisor;
end $$;

create function internal.supervisor_lock_id(_supervisor text) returns bigint
language plpgsql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
begin
    return hashtextextended('taskorch.supervisor_tick:' || _supervisor, 0);
end $$;

-- queues.process_backoff (0010), with the same answers, as PL/pgSQL: a tick computes it for
-- every instance it decides.
create or replace function queues.process_backoff(_failures integer, _base interval, _max interval) returns interval
language plpgsql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
begin
    return case
        when coalesce(_failures, 0) <= 0 then interval '0'
        when _failures >= 31 then _max
        else least(_max, _base * power(2, _failures - 1)::double precision)
    end;
end $$;

-- Makes sure a tick of _supervisor is pending to run at or before _at: leaves a pending tick
-- due by then alone, moves a later one to _at, or inserts one. No lock is taken when a tick is
-- already due in time, the usual case under load.
create function internal.schedule_supervisor_tick(_supervisor text, _at timestamptz) returns void
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _key text := internal.supervisor_tick_key(_supervisor);
begin
    _at := coalesce(_at, now());
    if exists (select 1 from queues.task
               where task_type = 'db_function' and debounce_key = _key and status = 'pending' and run_at <= _at) then
        return;
    end if;
    insert into queues.task as t (task_type, payload, scheduled_at, run_at, max_attempts, debounce_key)
    values ('db_function', jsonb_build_object('db_function', _supervisor, 'tick', true), _at, _at,
            queues.default_max_attempts(), _key)
    on conflict (task_type, debounce_key) where status = 'pending' and debounce_key is not null
    do update set run_at = excluded.run_at, scheduled_at = excluded.scheduled_at
        where t.run_at > excluded.run_at;
    -- A moved tick is not an insert: wake the workers as the insert trigger would.
    perform pg_notify('taskorch_task', '');
end $$;

-- Wakes _supervisor (a db_function name, schema.function) by _at (now by default): call it in
-- the transaction that made an instance of its process due. Raises invalid_parameter_value for
-- a name that is not schema.function.
create function queues.wake_supervisor(_supervisor text, _at timestamptz default now()) returns void
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _supervisor is null or _supervisor !~ '^[a-z_][a-z0-9_$]*\.[a-z_][a-z0-9_$]*$' then
        raise exception 'wake_supervisor: the supervisor must be a schema.function name, got %',
            coalesce(quote_literal(left(_supervisor, 100)), 'NULL') using errcode = 'invalid_parameter_value';
    end if;
    perform pg_advisory_xact_lock_shared(internal.supervisor_lock_id(_supervisor));
    perform internal.schedule_supervisor_tick(_supervisor, _at);
end $$;

-- Called by a tick before it reads its due instances: true when no wake-up of _supervisor is in
-- flight (the next statement sees every instance made due so far); false when one is, and then
-- a follow-up tick is scheduled _retry from now, so the instances it makes due are not left
-- waiting for their next check.
create function queues.supervisor_tick_clean(_supervisor text, _retry interval default interval '50 milliseconds') returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if pg_try_advisory_lock(internal.supervisor_lock_id(_supervisor)) then
        perform pg_advisory_unlock(internal.supervisor_lock_id(_supervisor));
        return true;
    end if;
    perform internal.schedule_supervisor_tick(_supervisor, now() + coalesce(_retry, interval '0'));
    return false;
end $$;

-- Called by a tick at its end: schedules the next tick for the earliest due instance (_next,
-- null when none is due any more: then no tick is pending until a wake-up).
create function queues.schedule_supervisor_tick(_supervisor text, _next timestamptz) returns void
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _next is not null then
        perform internal.schedule_supervisor_tick(_supervisor, greatest(_next, now()));
    end if;
end $$;

revoke all on function internal.supervisor_tick_key(text), internal.supervisor_lock_id(text),
    internal.schedule_supervisor_tick(text, timestamptz), queues.wake_supervisor(text, timestamptz),
    queues.supervisor_tick_clean(text, interval), queues.schedule_supervisor_tick(text, timestamptz) from public;
