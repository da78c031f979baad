-- Facts helper: whether the SMS can succeed no more: no success, and its attempts used up or one
-- failed permanently.
create or replace function comms.is_send_sms_stuck(_send_sms_task_id bigint) returns boolean
language sql stable set search_path = pg_catalog, pg_temp as $$
    select not comms.has_send_sms_succeeded_attempt(_send_sms_task_id)
       and (comms.count_send_sms_failed_attempts(_send_sms_task_id)
                >= (select max_attempts from comms.process_config where process = 'send_sms')
            or comms.has_send_sms_permanent_failure(_send_sms_task_id))
$$;
revoke all on function comms.is_send_sms_stuck(bigint) from public;
