-- Puts a running task back to pending until _run_at under its lease, without counting the attempt;
-- false under a stale lease.
create or replace function queues.snooze_task(_task_id bigint, _lease_id bigint, _run_at timestamptz)
returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
begin
    perform internal.check_finite('snooze_task', '_run_at', _run_at);
    update queues.task
    set status = 'pending', run_at = coalesce(_run_at, clock_timestamp()), lease_expires_at = null,
        attempt = greatest(attempt - 1, 0)
    where task_id = _task_id and lease_id = _lease_id and lease_expires_at is not null  -- i.e. running
    returning * into _t;
    if not found then
        return false;
    end if;
    insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
    values (_task_id, 'snoozed', 'running', 'pending', _lease_id, _t.worker_id, _t.attempt + 1,
            'until ' || _t.run_at::text);
    return true;
end $$;
revoke all on function queues.snooze_task(bigint, bigint, timestamp with time zone) from public;
grant execute on function queues.snooze_task(bigint, bigint, timestamp with time zone) to worker_service_user;
