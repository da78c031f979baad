-- Enqueues given past ticks of a schedule under each tick's idempotency key, recording who did
-- it in queues.schedule_event (docs/operations.md, "Steering a schedule").
create or replace function queues.backfill_schedule(_name text, _ticks timestamptz[], _actor text default null)
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
        from internal.insert_schedule_task(_s, _tick, internal.schedule_tick_key(_s.name, _tick)) r;
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
