-- Records an error against a task the caller holds a lease on (for outcomes that are not a
-- failure of the attempt: a supervisor's named non-success status, a before handler's refusal).
-- Bounded to 8 KiB. False, and nothing recorded, when the lease is not the task's current one.
create or replace function queues.record_error(_task_id bigint, _lease_id bigint, _error_message text, _context jsonb default null)
returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _worker text;
begin
    select worker_id into _worker from queues.task where task_id = _task_id and lease_id = _lease_id;
    if not found then
        return false;
    end if;
    insert into queues.error (task_id, error_message, context)
    values (_task_id, left(coalesce(nullif(_error_message, ''), 'unknown error'), 8192),
            case when jsonb_typeof(_context) = 'object' then _context else '{}'::jsonb end
              || jsonb_build_object('lease_id', _lease_id, 'worker_id', _worker));
    return true;
end $$;
revoke all on function queues.record_error(bigint, bigint, text, jsonb) from public;
grant execute on function queues.record_error(bigint, bigint, text, jsonb) to worker_service_user;
