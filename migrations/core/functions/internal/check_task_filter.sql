-- Checks a filter for action (retry, cancel, delete) and returns the statuses it matches: the
-- ones given, or every status the action takes a task from. At least one condition is needed;
-- a status the action does not take, or a finish-time bound with a status that has no finish
-- time, is refused (22023), naming the argument.
create or replace function internal.check_task_filter(
    _label text, _action text, _statuses queues.task_status[], _task_types text[], _idempotency_key text,
    _enqueued_since timestamptz, _enqueued_until timestamptz, _finished_since timestamptz, _finished_until timestamptz)
returns queues.task_status[]
language plpgsql stable set search_path = pg_catalog, pg_temp as $$
declare
    _allowed queues.task_status[] := internal.task_action_statuses(_action);
    _bad queues.task_status;
    _type text;
begin
    if _allowed is null then
        raise exception '%: unknown action %', _label, quote_nullable(_action) using errcode = 'invalid_parameter_value';
    end if;
    if _statuses is not null and (cardinality(_statuses) = 0 or array_position(_statuses, null) is not null) then
        raise exception '%: _statuses must be NULL or a list of statuses without NULL, got %', _label, _statuses
            using errcode = 'invalid_parameter_value';
    end if;
    select s into _bad from unnest(_statuses) s where s <> all (_allowed) limit 1;
    if found then
        raise exception '%: _statuses: % acts on % tasks, not %', _label, _action, array_to_string(_allowed, ', '), _bad
            using errcode = 'invalid_parameter_value';
    end if;
    if _task_types is not null then
        if cardinality(_task_types) not between 1 and 100 then
            raise exception '%: _task_types must be NULL or 1 to 100 task types, got %', _label, cardinality(_task_types)
                using errcode = 'invalid_parameter_value';
        end if;
        foreach _type in array _task_types loop
            if _type is null or _type !~ '^[A-Za-z][A-Za-z0-9_.:-]*$' or length(_type) > 128 then
                raise exception '%: _task_types: % is not a task type', _label, coalesce(quote_literal(left(_type, 140)), 'NULL')
                    using errcode = 'invalid_parameter_value';
            end if;
        end loop;
    end if;
    if _idempotency_key is not null and length(_idempotency_key) not between 1 and 512 then
        raise exception '%: _idempotency_key must be 1 to 512 characters, got %', _label, length(_idempotency_key)
            using errcode = 'invalid_parameter_value';
    end if;
    perform internal.check_finite(_label, '_enqueued_since', _enqueued_since);
    perform internal.check_finite(_label, '_enqueued_until', _enqueued_until);
    perform internal.check_finite(_label, '_finished_since', _finished_since);
    perform internal.check_finite(_label, '_finished_until', _finished_until);
    if _enqueued_since >= _enqueued_until then
        raise exception '%: _enqueued_since (%) must be before _enqueued_until (%)', _label, _enqueued_since, _enqueued_until
            using errcode = 'invalid_parameter_value';
    end if;
    if _finished_since >= _finished_until then
        raise exception '%: _finished_since (%) must be before _finished_until (%)', _label, _finished_since, _finished_until
            using errcode = 'invalid_parameter_value';
    end if;
    if _statuses is null and _task_types is null and _idempotency_key is null and _enqueued_since is null
       and _enqueued_until is null and _finished_since is null and _finished_until is null then
        raise exception '%: give at least one condition (_statuses, _task_types, _idempotency_key, _enqueued_since, _enqueued_until, _finished_since, _finished_until)', _label
            using errcode = 'invalid_parameter_value';
    end if;
    if coalesce(_finished_since, _finished_until) is not null then
        select s into _bad from unnest(_statuses) s where s in ('pending', 'running') limit 1;
        if found then
            raise exception '%: _finished_since and _finished_until match finished tasks only; % tasks have no finish time (filter on _enqueued_since or _enqueued_until)',
                _label, _bad using errcode = 'invalid_parameter_value';
        end if;
        _allowed := array(select s from unnest(_allowed) s where s not in ('pending', 'running'));
    end if;
    return coalesce(_statuses, _allowed);
end $$;
revoke all on function internal.check_task_filter(text, text, queues.task_status[], text[], text, timestamptz, timestamptz, timestamptz, timestamptz) from public;
