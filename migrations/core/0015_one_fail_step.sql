-- One fail step.
--
-- queues.fail_task (0002) and queues.fail_task_with_policy (0014) each carried their own copy of
-- "fail the attempt a lease holds": the lease check, the choice of the next status, the update,
-- the error row and the event. Both now call internal.fail_attempt, the one place that fails an
-- attempt. Their signatures, results, errors and grants are unchanged.
--
-- schema.sql, at the repository's root, holds every current definition after all migrations.

-- Fails the attempt _lease_id holds on _task_id. The next status is:
--   failed  when _retriable is false;
--   dead    when the attempt has reached the lesser of the task's max_attempts and
--           _max_attempts (NULL: the task's max_attempts alone);
--   pending otherwise, runnable after _retry_delay (NULL: queues.retry_delay(attempt)).
-- The error is recorded in queues.error with _context (and the policy, when one was given), the
-- change in queues.task_event. Returns the task's new status, or NULL when refused because the
-- lease is stale (the refusal is recorded); a repeat under the same lease returns the status
-- without change. _caller names the public function in input errors.
create function internal.fail_attempt(
    _caller text,
    _task_id bigint,
    _error_message text,
    _lease_id bigint,
    _retriable boolean,
    _retry_delay interval,
    _max_attempts integer,
    _context jsonb)
returns queues.task_status
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
    _msg text := left(coalesce(nullif(_error_message, ''), 'unknown error'), 8192);
    _to queues.task_status;
    _ctx jsonb := case when jsonb_typeof(_context) = 'object' then _context else '{}'::jsonb end;
    _policy jsonb := '{}'::jsonb;
begin
    if _retry_delay < interval '0' then
        raise exception '%: _retry_delay must not be negative, got %', _caller, _retry_delay
            using errcode = 'invalid_parameter_value';
    end if;
    if _max_attempts < 1 then
        raise exception '%: _max_attempts must be at least 1, got %', _caller, _max_attempts
            using errcode = 'invalid_parameter_value';
    end if;

    select * into _t from queues.task where task_id = _task_id for update;
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
        run_at = case when _to = 'pending' then now() + coalesce(_retry_delay, queues.retry_delay(_t.attempt)) else run_at end,
        failed_at = case when _to = 'failed' then now() else failed_at end,
        dead_at = case when _to = 'dead' then now() else dead_at end
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

-- Fails the attempt a lease holds (the worker's form): internal.fail_attempt with the task's own
-- retry policy. A non-retriable failure makes the task failed.
create or replace function queues.fail_task(
    _task_id bigint,
    _error_message text,
    _lease_id bigint,
    _retriable boolean default true,
    _context jsonb default null)
returns queues.task_status
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    select internal.fail_attempt('fail_task', _task_id, _error_message, _lease_id, _retriable, null, null, _context)
$$;

-- Fails, as retriable, the attempt a lease holds under a Go handler's own policy:
-- internal.fail_attempt with an explicit retry delay and a cap on the attempts.
create or replace function queues.fail_task_with_policy(
    _task_id bigint,
    _error_message text,
    _lease_id bigint,
    _retry_delay interval default null,
    _max_attempts integer default null,
    _context jsonb default null)
returns queues.task_status
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    select internal.fail_attempt('fail_task_with_policy', _task_id, _error_message, _lease_id, true,
                                 _retry_delay, _max_attempts, _context)
$$;

-- Privileges -----------------------------------------------------------------------------------
-- The step is the owner's; fail_task and fail_task_with_policy keep their grants (CREATE OR
-- REPLACE does not change them).
revoke all on function
    internal.fail_attempt(text, bigint, text, bigint, boolean, interval, integer, jsonb)
from public;
