-- Prompt cancellation (docs/worker.md, "Cancellation"). Cancelling a running task used to reach
-- its worker only at the next lease renewal (LeaseDuration/3, 100 s by default). Now
-- queues.cancel_task also sends NOTIFY taskorch_cancel with '<task_id>:<lease_id>' in the
-- cancelling transaction (so it is delivered only if the cancel commits), and workers ask
-- queues.lost_leases which of their running tasks are no longer theirs.
--
-- A notification is only a hint: any role may NOTIFY, so the worker never stops a task on a
-- payload's word; it stops the tasks queues.lost_leases reports, as it stops those its lease
-- renewal did not extend.

-- Cancels a task that is pending, running, failed or dead. A running task's worker is told at
-- once (NOTIFY taskorch_cancel, '<task_id>:<lease_id>', sent at commit), stops the task's handler,
-- and its completion is refused. Cancelling a cancelled task is a no-op; a completed task cannot
-- be cancelled (55000). Returns the new status.
create or replace function queues.cancel_task(_task_id bigint, _reason text default null) returns queues.task_status
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
begin
    select * into _t from queues.task where task_id = _task_id for update;
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
    update queues.task set status = 'cancelled', cancelled_at = now(), lease_expires_at = null
    where task_id = _task_id;
    insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
    values (_task_id, 'cancelled', _t.status, 'cancelled', _t.lease_id, session_user, _t.attempt,
            left(nullif(_reason, ''), 1024));
    if _t.status = 'running' and _t.lease_expires_at is not null then
        perform pg_notify('taskorch_cancel', _task_id::text || ':' || _t.lease_id::text);
    end if;
    return 'cancelled';
end $$;

-- Of the leases a worker believes it holds (_task_ids[i] under _lease_ids[i]), returns those it
-- no longer holds, with the task's status now (NULL: the task is gone): cancelled, or expired
-- and rescued or taken over, or finished. Reads only; the worker calls it when told of a
-- cancellation, after its LISTEN connection comes back, every 500 ms while it polls, and for the
-- tasks its lease renewal did not extend. The arrays must be of the same length (22023).
create function queues.lost_leases(_task_ids bigint[], _lease_ids bigint[])
returns table (task_id bigint, status queues.task_status)
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _task_ids is null or _lease_ids is null or cardinality(_task_ids) <> cardinality(_lease_ids) then
        raise exception 'lost_leases: _task_ids and _lease_ids must be arrays of the same length, got % and %',
            coalesce(cardinality(_task_ids)::text, 'NULL'), coalesce(cardinality(_lease_ids)::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    return query
    select c.task_id, t.status
    from unnest(_task_ids, _lease_ids) as c(task_id, lease_id)
    left join queues.task t on t.task_id = c.task_id
    where t.task_id is null
       or t.lease_id is distinct from c.lease_id
       or t.status <> 'running'
       or t.lease_expires_at is null;  -- renew_leases would not extend it
end $$;

revoke all on function queues.lost_leases(bigint[], bigint[]) from public;
grant execute on function queues.lost_leases(bigint[], bigint[]) to worker_service_user;
