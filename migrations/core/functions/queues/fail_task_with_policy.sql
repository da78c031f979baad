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
revoke all on function queues.fail_task_with_policy(bigint, text, bigint, interval, integer, jsonb) from public;
grant execute on function queues.fail_task_with_policy(bigint, text, bigint, interval, integer, jsonb) to worker_service_user;
