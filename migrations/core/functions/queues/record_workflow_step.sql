-- Records a durable Go workflow's checkpoint at position _seq, under the task's lease
-- (docs/workflows.md, "Durable workflows in Go"): only the worker holding the current lease of a
-- running task writes it, so a stale worker's checkpoint is refused. Called inside the step's own
-- transaction for a transactional step (after queues.lock_lease), so the application's writes
-- and the checkpoint commit together. A sleep's wake time (a signal wait's deadline) is taken
-- from the database's clock: now plus _sleep. Returns recorded (false: the lease is not the task's current one, or the
-- position holds a checkpoint already; nothing written) and the wake time.
create or replace function queues.record_workflow_step(
    _task_id bigint, _lease_id bigint, _seq integer, _kind text, _name text, _result jsonb,
    _sleep interval default null, _started_at timestamptz default null)
returns table (recorded boolean, wake_at timestamptz)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _wake timestamptz;
    _n integer;
begin
    if _seq is null or _seq not between 1 and 100000 then
        raise exception 'record_workflow_step: _seq must be between 1 and 100000, got %', coalesce(_seq::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _kind is null or _kind not in ('step', 'step_tx', 'sleep', 'version', 'signal_wait', 'signal', 'spawn', 'await') then
        raise exception 'record_workflow_step: _kind must be step, step_tx, sleep, version, signal_wait, signal, spawn or await, got %', coalesce(_kind, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _name is null or _name = '' or length(_name) > 200 then
        raise exception 'record_workflow_step: _name must be 1 to 200 characters'
            using errcode = 'invalid_parameter_value';
    end if;
    if (_kind in ('sleep', 'signal_wait')) <> (_sleep is not null) or _sleep < interval '0' then
        raise exception 'record_workflow_step: a sleep or a signal wait, and only they, take a _sleep of zero or more, got %', coalesce(_sleep::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _sleep is not null then
        _wake := clock_timestamp() + _sleep;
        if not internal.time_in_range(_wake) then
            raise exception 'record_workflow_step: the sleep of % ends past the year 9999', _sleep
                using errcode = 'invalid_parameter_value';
        end if;
    end if;
    insert into queues.workflow_step (task_id, seq, kind, name, result, wake_at, lease_id, attempt, started_at)
    select t.task_id, _seq, _kind, _name, _result, _wake, _lease_id, t.attempt, _started_at
    from queues.task t
    where t.task_id = _task_id and t.lease_id = _lease_id and t.lease_expires_at is not null -- i.e. running
    for key share of t
    on conflict on constraint workflow_step_pkey do nothing;
    get diagnostics _n = row_count;
    return query select _n = 1, _wake;
end $$;
revoke all on function queues.record_workflow_step(bigint, bigint, integer, text, text, jsonb, interval, timestamptz) from public;
grant execute on function queues.record_workflow_step(bigint, bigint, integer, text, text, jsonb, interval, timestamptz) to worker_service_user;
comment on function queues.record_workflow_step(bigint, bigint, integer, text, text, jsonb, interval, timestamptz) is
    'Records a durable Go workflow''s checkpoint under the task''s current lease; false (nothing written) under a stale lease or when the position holds one already.';
