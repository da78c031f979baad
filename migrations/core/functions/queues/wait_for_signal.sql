-- Registers pending task _task_id to be made due the moment signal (_name, _key) arrives;
-- returns false. When the signal has arrived already, makes the task due now instead (if it is
-- not due yet) and returns true. Registering twice is harmless. A missing task raises P0002, a
-- task that is not pending 55000, bad input 22023.
create or replace function queues.wait_for_signal(_name text, _key text, _task_id bigint) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _status queues.task_status;
begin
    perform internal.check_signal_key('wait_for_signal', _name, _key);
    if _task_id is null then
        raise exception 'wait_for_signal: task_id must not be null' using errcode = 'invalid_parameter_value';
    end if;

    perform internal.lock_signal(_name, _key);
    select t.status into _status from queues.task t where t.task_id = _task_id for update;
    if not found then
        raise exception 'wait_for_signal: task % does not exist', _task_id using errcode = 'no_data_found';
    end if;
    if _status <> 'pending' then
        raise exception 'wait_for_signal: task % is %; only a pending task can wait for a signal', _task_id, _status
            using errcode = 'object_not_in_prerequisite_state';
    end if;

    if exists (select from queues.signal s where s.name = _name and s.key = _key) then
        perform internal.wake_signal_waiters(array[_task_id], _name, _key);
        return true;
    end if;
    insert into queues.signal_wait (name, key, task_id) values (_name, _key, _task_id)
    on conflict do nothing;
    return false;
end $$;
revoke all on function queues.wait_for_signal(text, text, bigint) from public;
