-- Cancels a task that is not completed; a running one's worker is told (docs/worker.md,
-- "Cancellation"). Returns its status.
create or replace function queues.cancel_task(_task_id bigint, _reason text default null)
returns queues.task_status
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
begin
    select * into _t from queues.task where task_id = _task_id for no key update;
    if not found then
        raise exception 'task % does not exist', _task_id using errcode = 'no_data_found';
    end if;
    if _t.status = 'cancelled' then
        return _t.status;
    end if;
    if _t.status = 'completed' then
        raise exception 'task % is already completed and cannot be cancelled', _task_id
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    update queues.task set status = 'cancelled', cancelled_at = clock_timestamp(), lease_expires_at = null
    where task_id = _task_id;
    insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
    values (_task_id, 'cancelled', _t.status, 'cancelled', _t.lease_id, session_user, _t.attempt,
            left(nullif(_reason, ''), 1024));
    if _t.status = 'running' and _t.lease_expires_at is not null then
        perform pg_notify('taskorch_cancel', _task_id::text || ':' || _t.lease_id::text);
    end if;
    return 'cancelled';
end $$;
revoke all on function queues.cancel_task(bigint, text) from public;
