-- Retry by hand: restarts failed instance _id (run n+1) for _reason, and makes it due now, so
-- the next tick makes a new attempt. Raises, writing nothing, when the reason is empty
-- (invalid_parameter_value), the instance does not exist (no_data_found), or it is not failed
-- (object_not_in_prerequisite_state). Two retries at once: the root row's lock orders them, and
-- the second finds the instance running. Called through queues.retry_process.
create or replace function comms.retry_send_sms(_send_sms_task_id bigint, _reason text) returns integer
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _run  integer;
    _last bigint;
begin
    if _reason is null or btrim(_reason) = '' then
        raise exception 'retry_send_sms: a reason is required (it is recorded with the restart)'
            using errcode = 'invalid_parameter_value';
    end if;
    if length(btrim(_reason)) > 2000 then
        raise exception 'retry_send_sms: the reason must be at most 2000 characters, got %', length(btrim(_reason))
            using errcode = 'invalid_parameter_value';
    end if;
    perform 1 from comms.send_sms_task where send_sms_task_id = _send_sms_task_id for update;
    if not found then
        raise exception 'retry_send_sms: comms.send_sms has no instance %', coalesce(_send_sms_task_id::text, 'NULL')
            using errcode = 'no_data_found';
    end if;
    if exists (select 1 from comms.send_sms_task_succeeded where send_sms_task_id = _send_sms_task_id) then
        raise exception 'retry_send_sms: comms.send_sms % succeeded; only a failed instance can be retried', _send_sms_task_id
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    _run := comms.send_sms_run(_send_sms_task_id);
    if not exists (select 1 from comms.send_sms_task_failed where send_sms_task_id = _send_sms_task_id and run = _run) then
        raise exception 'retry_send_sms: comms.send_sms % is running, not failed; only a failed instance can be retried', _send_sms_task_id
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    select max(send_sms_attempt_id) into _last from comms.send_sms_attempt where send_sms_task_id = _send_sms_task_id;
    insert into comms.send_sms_task_restarted (send_sms_task_id, run, reason, last_attempt_id)
    values (_send_sms_task_id, _run + 1, btrim(_reason), _last);
    perform comms.wake_send_sms(_send_sms_task_id, now());
    return _run + 1;
end $$;
revoke all on function comms.retry_send_sms(bigint, text) from public;
