-- A delivery fact wakes its process, whoever records it.
create or replace function comms.wake_send_sms_on_delivery() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    perform comms.wake_send_sms(a.send_sms_task_id, now())
    from comms.send_sms_attempt a where a.send_sms_attempt_id = new.send_sms_attempt_id;
    return null;
end $$;
revoke all on function comms.wake_send_sms_on_delivery() from public;
