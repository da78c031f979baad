-- Facts helper: whether the e-mail can succeed no more: no success, and its attempts used up or
-- one failed permanently.
create or replace function comms.is_send_email_stuck(_send_email_task_id bigint) returns boolean
language sql stable set search_path = pg_catalog, pg_temp as $$
    select not comms.has_send_email_succeeded_attempt(_send_email_task_id)
       and (comms.count_send_email_failed_attempts(_send_email_task_id)
                >= (select max_attempts from comms.process_config where process = 'send_email')
            or comms.has_send_email_permanent_failure(_send_email_task_id))
$$;
revoke all on function comms.is_send_email_stuck(bigint) from public;
