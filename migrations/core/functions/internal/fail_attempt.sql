-- A failed attempt, under its lease (fail_task, fail_task_with_policy): retried after _retry_delay
-- while attempts are left and _retriable, else failed or dead; a stale lease's outcome is refused
-- and recorded in queues.error.
create or replace function internal.fail_attempt(
    _caller text, _task_id bigint, _error_message text, _lease_id bigint, _retriable boolean,
    _retry_delay interval, _max_attempts integer, _context jsonb)
returns queues.task_status
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
    _msg text := left(coalesce(nullif(_error_message, ''), 'unknown error'), 8192);
    _to queues.task_status;
    _ctx jsonb := case when jsonb_typeof(_context) = 'object' then _context else '{}'::jsonb end;
    _policy jsonb := '{}'::jsonb;
    _now timestamptz := clock_timestamp();
begin
    if _retry_delay < interval '0' or _retry_delay > interval '100 years' then
        raise exception '%: _retry_delay must be between 0 and 100 years, got %', _caller, _retry_delay
            using errcode = 'invalid_parameter_value';
    end if;
    if _max_attempts < 1 then
        raise exception '%: _max_attempts must be at least 1, got %', _caller, _max_attempts
            using errcode = 'invalid_parameter_value';
    end if;

    select * into _t from queues.task where task_id = _task_id for no key update;
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
                when _t.attempt >= least(_t.max_attempts, coalesce(_max_attempts, _t.max_attempts)) then 'dead'
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
        run_at = case when _to = 'pending' then _now + coalesce(_retry_delay, queues.retry_delay(_t.attempt)) else run_at end,
        failed_at = case when _to = 'failed' then _now else failed_at end,
        dead_at = case when _to = 'dead' then _now else dead_at end
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
revoke all on function internal.fail_attempt(text, bigint, text, bigint, boolean, interval, integer, jsonb) from public;
