-- Brings a dead, failed or cancelled task back to pending by hand, its attempts reset and its
-- history kept. A task that names parents waits for those that have not ended, and the tasks
-- that its cascade cancelled wait again (internal.rewait_after_retry, docs/workflows.md
-- "Retrying a node"). A waiting task is refused (it has not run). Returns its status.
create or replace function queues.retry_task(_task_id bigint) returns queues.task_status
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
begin
    select * into _t from queues.task where task_id = _task_id for no key update;
    if not found then
        raise exception 'task % does not exist', _task_id using errcode = 'no_data_found';
    end if;
    if _t.status = 'running' then
        raise exception 'task % is running; cancel it or wait for it to finish before retrying', _task_id
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    if _t.status = 'waiting' then
        raise exception 'task % is waiting for its parents; it runs when they have ended', _task_id
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    if _t.status = 'completed' then
        raise exception 'task % is already completed; enqueue a new task to run it again', _task_id
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    update queues.task
    set status = 'pending', run_at = clock_timestamp(),
        attempt = case when _t.status = 'pending' then attempt else 0 end,
        limit_name = (select l.task_type from internal.limit_of(_t.task_type, _t.payload) l),
        limit_key = (select internal.limit_key(l.key_field, _t.payload) from internal.limit_of(_t.task_type, _t.payload) l
                     where l.task_type is not null)
    where task_id = _task_id;
    insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
    values (_task_id, 'retried', _t.status, 'pending', null, session_user, _t.attempt,
            format('retried by hand after %s attempt(s)', _t.attempt));
    if _t.status in ('failed', 'dead', 'cancelled') then
        perform internal.rewait_after_retry(array[_task_id], null);
    end if;
    perform pg_notify('taskorch_task', '');
    return (select t.status from queues.task t where t.task_id = _task_id);
end $$;
revoke all on function queues.retry_task(bigint) from public;
