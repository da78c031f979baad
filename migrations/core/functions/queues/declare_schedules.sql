-- Makes the schedules declared in code (queues.schedule.declared_in_code) those of _schedules, as
-- the leader of _term (docs/worker.md, "Periodic tasks declared in code"): a JSON array of
-- {name, cron, task_type, payload, priority, max_attempts}, at most 1,000. Each is added, or its
-- definition updated, through queues.put_schedule, as add_schedule would: a changed cron starts
-- at the first tick after now, an unchanged one keeps its next tick. Whether a schedule runs is
-- the operator's (pause_schedule, resume_schedule): a new one starts enabled, an existing one
-- keeps its state. A schedule of the same name added by hand is left as it is ('conflict'). The
-- schedules declared in code that _schedules does not name are removed (their tasks stay).
-- Types that name a function (db_function, the channels) are refused: the worker role may not
-- name functions. Returns what it did, one row per schedule; nothing when _term is not the
-- current leader term. Granted to worker_service_user: the leader runs it.
create or replace function queues.declare_schedules(_term bigint, _schedules jsonb)
returns table (schedule_name text, action text)
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _d jsonb;
    _s queues.schedule;
    _name text;
    _cron text;
    _type text;
    _payload jsonb;
    _priority integer;
    _max integer;
    _names text[] := '{}';
begin
    if jsonb_typeof(_schedules) is distinct from 'array' then
        raise exception 'declare_schedules: _schedules must be a JSON array, got %', coalesce(jsonb_typeof(_schedules), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if jsonb_array_length(_schedules) > 1000 then
        raise exception 'declare_schedules: _schedules has % schedules, over 1,000', jsonb_array_length(_schedules)
            using errcode = 'invalid_parameter_value';
    end if;
    if not internal.holds_leader_term(_term) then
        return;
    end if;
    for _d in select e from jsonb_array_elements(_schedules) as e loop
        if jsonb_typeof(_d) is distinct from 'object' then
            raise exception 'declare_schedules: each schedule must be a JSON object' using errcode = 'invalid_parameter_value';
        end if;
        _name := _d->>'name';
        _cron := btrim(coalesce(_d->>'cron', ''));
        _type := _d->>'task_type';
        _payload := coalesce(_d->'payload', '{}');
        _priority := coalesce((_d->>'priority')::integer, 0);
        _max := (_d->>'max_attempts')::integer;
        if _type in ('db_function', 'email', 'sms', 'file_delete') then
            raise exception 'declare_schedules: schedule % has task type %, which names a function: declare it with queues.add_schedule instead',
                quote_literal(_name), _type using errcode = 'invalid_parameter_value';
        end if;
        if _name = any(_names) then
            raise exception 'declare_schedules: schedule % is declared twice', quote_literal(_name)
                using errcode = 'invalid_parameter_value';
        end if;
        _names := _names || _name;
        schedule_name := _name;
        select * into _s from queues.schedule s where s.name = _name for update;
        if not found then
            perform queues.put_schedule(_name, _cron, _type, _payload, _priority, _max, true, null);
            update queues.schedule s set declared_in_code = true where s.name = _name;
            action := 'created';
        elsif not _s.declared_in_code then
            action := 'conflict';
        elsif (_s.cron, _s.task_type, _s.payload, _s.priority, _s.max_attempts)
              is not distinct from (_cron, _type, _payload, _priority, _max) then
            action := 'unchanged';
        else
            perform queues.put_schedule(_name, _cron, _type, _payload, _priority, _max, _s.enabled, null);
            action := 'updated';
        end if;
        return next;
    end loop;
    for schedule_name in
        delete from queues.schedule s where s.declared_in_code and s.name <> all(_names) returning s.name
    loop
        action := 'removed';
        return next;
    end loop;
end $$;
revoke all on function queues.declare_schedules(bigint, jsonb) from public;
grant execute on function queues.declare_schedules(bigint, jsonb) to worker_service_user;
comment on function queues.declare_schedules(bigint, jsonb) is
    'The leader makes the schedules declared in code (WorkerConfig.Periodic) those of _schedules: added, updated, removed; a schedule added by hand is left alone (conflict). Refuses types that name a function.';
