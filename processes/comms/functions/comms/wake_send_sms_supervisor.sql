-- Kept for callers of earlier versions: wakes the supervisor for instance _id now.
create or replace function comms.wake_send_sms_supervisor(_send_sms_task_id bigint, _attempt_id bigint) returns void
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    select comms.wake_send_sms(_send_sms_task_id, now());
$$;
revoke all on function comms.wake_send_sms_supervisor(bigint, bigint) from public;
