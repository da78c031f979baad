-- Schedules an operator can steer (docs/operations.md, "Steering a schedule"): pause and resume,
-- run now, backfill a window; each recorded with who did it in queues.schedule_event.
--
-- - queues.pause_schedule and queues.resume_schedule turn queues.schedule.enabled off and on. A
--   resumed schedule starts at _next_run_at, the first tick after now that the caller computes
--   with the leader's cron parser (admin.ResumeSchedule), so it does not replay what it missed
--   while paused (queues.add_schedule does the same when it enables a schedule again).
-- - queues.run_schedule_now enqueues one task of the schedule now, outside its ticks: its
--   next_run_at and last tick do not move. Its key is schedule:<name>:now:<the time, to the
--   microsecond>, so it is told apart from a tick's (schedule:<name>:<tick>).
-- - queues.backfill_schedule enqueues the given ticks, each under the tick's own idempotency key
--   (internal.schedule_tick_key, the leader's): a tick already enqueued (by the leader or an
--   earlier backfill, as long as its task is kept) is not enqueued again. The SQL cannot parse
--   cron: the caller computes a window's ticks with the leader's parser (admin.BackfillSchedule),
--   up to 1,000 a call; ticks in the future are refused (the leader enqueues those).
--
-- Granted to nobody, the worker role included: grant them (and SELECT on queues.schedule_event)
-- to an operator's role (docs/security.md, "An operator's role").

create table queues.schedule_event (
    schedule_event_id bigint generated always as identity primary key,
    name text not null,
    occurred_at timestamptz not null default clock_timestamp(),
    event text not null,
    actor text not null,
    detail jsonb not null default '{}',
    constraint schedule_event_event_valid check (event in ('paused', 'resumed', 'run_now', 'backfilled')),
    constraint schedule_event_detail_object check (jsonb_typeof(detail) = 'object')
);
create index schedule_event_name_idx on queues.schedule_event (name, schedule_event_id);
create trigger schedule_event_append_only before update on queues.schedule_event
    for each statement execute function internal.refuse_update();
revoke all on queues.schedule_event from public;
comment on table queues.schedule_event is
    'Append-only: what operators did to schedules (paused, resumed, run_now, backfilled), who (actor) and when; detail holds the task of a run and a backfill''s counts. Kept when the schedule is removed; rows are rare (delete old ones by hand).';

-- The schedule's row, locked for the change, or P0002 when there is none; a malformed name is
-- 22023.
create function internal.lock_schedule(_label text, _name text)
returns queues.schedule
language plpgsql set search_path = pg_catalog, pg_temp as $$
declare
    _s queues.schedule;
begin
    if _name is null or _name !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$' or length(_name) > 128 then
        raise exception '%: _name % is not a schedule name', _label, coalesce(quote_literal(left(_name, 140)), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    -- The leader's queues.enqueue_schedule_tick locks the row the same way for one tick: a wait
    -- here is that statement's, milliseconds.
    select * into _s from queues.schedule s where s.name = _name for no key update;
    if not found then
        raise exception '%: schedule % does not exist', _label, quote_literal(_name) using errcode = 'no_data_found';
    end if;
    return _s;
end $$;
revoke all on function internal.lock_schedule(text, text) from public;

create function queues.pause_schedule(_name text, _actor text default null)
returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _s queues.schedule := internal.lock_schedule('pause_schedule', _name);
begin
    _actor := internal.operator_actor('pause_schedule', _actor);
    if not _s.enabled then
        return false;
    end if;
    update queues.schedule set enabled = false, updated_at = now() where name = _name;
    insert into queues.schedule_event (name, event, actor) values (_name, 'paused', _actor);
    return true;
end $$;
revoke all on function queues.pause_schedule(text, text) from public;
comment on function queues.pause_schedule(text, text) is
    'Stops a schedule''s ticks (enabled = false), recording _actor (default: the database role); false when it was paused already. The tasks it enqueued are untouched.';

create function queues.resume_schedule(_name text, _next_run_at timestamptz, _actor text default null)
returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _s queues.schedule := internal.lock_schedule('resume_schedule', _name);
begin
    if _next_run_at is null then
        raise exception 'resume_schedule: _next_run_at must be the schedule''s first tick after now, got NULL'
            using errcode = 'invalid_parameter_value';
    end if;
    perform internal.check_finite('resume_schedule', '_next_run_at', _next_run_at);
    _actor := internal.operator_actor('resume_schedule', _actor);
    if _s.enabled then
        return false;
    end if;
    update queues.schedule set enabled = true, next_run_at = _next_run_at, updated_at = now() where name = _name;
    insert into queues.schedule_event (name, event, actor, detail)
    values (_name, 'resumed', _actor, jsonb_build_object('next_run_at', _next_run_at));
    return true;
end $$;
revoke all on function queues.resume_schedule(text, timestamptz, text) from public;
comment on function queues.resume_schedule(text, timestamptz, text) is
    'Lets a paused schedule tick again from _next_run_at (its first tick after now: what it missed while paused is not replayed), recording _actor; false when it was not paused.';

create function queues.run_schedule_now(_name text, _actor text default null)
returns bigint
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _s queues.schedule := internal.lock_schedule('run_schedule_now', _name);
    _at timestamptz := clock_timestamp();
    _id bigint;
begin
    _actor := internal.operator_actor('run_schedule_now', _actor);
    _id := queues.enqueue(_s.task_type, _s.payload, _at, _s.priority,
                          'schedule:' || _s.name || ':now:' || to_char(_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                          _s.max_attempts);
    insert into queues.schedule_event (name, event, actor, detail)
    values (_name, 'run_now', _actor, jsonb_build_object('task_id', _id));
    return _id;
end $$;
revoke all on function queues.run_schedule_now(text, text) from public;
comment on function queues.run_schedule_now(text, text) is
    'Enqueues one task of the schedule now, outside its ticks (next_run_at does not move; a paused schedule runs too), recording _actor; returns the task''s id.';

create function queues.backfill_schedule(_name text, _ticks timestamptz[], _actor text default null)
returns table (enqueued integer, existing integer)
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    _s queues.schedule := internal.lock_schedule('backfill_schedule', _name);
    _tick timestamptz;
    _new integer := 0;
    _old integer := 0;
    _dup boolean;
    _now timestamptz := clock_timestamp();
begin
    if _ticks is null or cardinality(_ticks) not between 1 and 1000 then
        raise exception 'backfill_schedule: _ticks must hold 1 to 1,000 ticks, got %', coalesce(cardinality(_ticks)::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    foreach _tick in array _ticks loop
        if _tick is null then
            raise exception 'backfill_schedule: _ticks must not hold NULL' using errcode = 'invalid_parameter_value';
        end if;
        perform internal.check_finite('backfill_schedule', '_ticks', _tick);
        if _tick > _now then
            raise exception 'backfill_schedule: tick % is in the future; the leader enqueues it when it comes', _tick
                using errcode = 'invalid_parameter_value';
        end if;
    end loop;
    _actor := internal.operator_actor('backfill_schedule', _actor);
    foreach _tick in array array(select distinct t from unnest(_ticks) t order by t) loop
        select r.duplicate into _dup
        from queues.enqueue_with_result(_s.task_type, _s.payload, _tick, _s.priority,
                                        internal.schedule_tick_key(_s.name, _tick), _s.max_attempts) r;
        if _dup then
            _old := _old + 1;
        else
            _new := _new + 1;
        end if;
    end loop;
    insert into queues.schedule_event (name, event, actor, detail)
    values (_name, 'backfilled', _actor, jsonb_build_object(
        'first_tick', (select min(t) from unnest(_ticks) t), 'last_tick', (select max(t) from unnest(_ticks) t),
        'enqueued', _new, 'existing', _old));
    return query select _new, _old;
end $$;
revoke all on function queues.backfill_schedule(text, timestamptz[], text) from public;
comment on function queues.backfill_schedule(text, timestamptz[], text) is
    'Enqueues the given past ticks of a schedule (1 to 1,000 a call, computed by the caller with the leader''s cron parser), each under the tick''s idempotency key, so a tick already enqueued is not enqueued again; records _actor. Returns how many were enqueued and how many existed.';
