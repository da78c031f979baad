-- Kickoff: as before, but the new instance is made due instead of getting a supervisor task of
-- its own.
create or replace function comms.kickoff_send_sms(
    _message_id bigint,
    _scheduled_at timestamptz default now(),
    out send_sms_task_id bigint,
    out validation_failure_message text)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _message_id is null then
        validation_failure_message := 'kickoff_send_sms: message_id is required';
        return;
    end if;
    if not exists (select 1 from comms.sms_message where message_id = _message_id) then
        validation_failure_message := format('kickoff_send_sms: sms message %s does not exist', _message_id);
        return;
    end if;

    insert into comms.send_sms_task (message_id, scheduled_at)
    values (_message_id, coalesce(_scheduled_at, now()))
    on conflict (message_id) do nothing
    returning comms.send_sms_task.send_sms_task_id into send_sms_task_id;
    if send_sms_task_id is null then
        -- Already started: the supervisor is running.
        select t.send_sms_task_id into send_sms_task_id from comms.send_sms_task t where t.message_id = _message_id;
        return;
    end if;
    perform comms.wake_send_sms(send_sms_task_id, coalesce(_scheduled_at, now()));
end $$;
revoke all on function comms.kickoff_send_sms(bigint, timestamp with time zone) from public;
