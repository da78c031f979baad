-- The facts helpers count the current run's attempts (is_..._stuck with them): same names,
-- arguments and answers for an instance never restarted.
create or replace function comms.count_send_sms_failed_attempts(_send_sms_task_id bigint) returns integer
language plpgsql stable set search_path = pg_catalog, pg_temp set plan_cache_mode = force_custom_plan as $$
begin
    return (select count(*)::integer from comms.send_sms_attempt a
            join comms.send_sms_attempt_failed f using (send_sms_attempt_id)
            where a.send_sms_task_id = _send_sms_task_id
              and a.send_sms_attempt_id > coalesce((select max(z.last_attempt_id) from comms.send_sms_task_restarted z
                                                 where z.send_sms_task_id = _send_sms_task_id), 0));
end $$;
alter function comms.count_send_sms_failed_attempts(bigint) reset plan_cache_mode;
alter function comms.count_send_sms_failed_attempts(bigint) set enable_seqscan = off;
alter function comms.count_send_sms_failed_attempts(bigint) set enable_hashjoin = off;
alter function comms.count_send_sms_failed_attempts(bigint) set enable_mergejoin = off;
alter function comms.count_send_sms_failed_attempts(bigint) reset plan_cache_mode;
alter function comms.count_send_sms_failed_attempts(bigint) set enable_seqscan = off;
alter function comms.count_send_sms_failed_attempts(bigint) set enable_hashjoin = off;
alter function comms.count_send_sms_failed_attempts(bigint) set enable_mergejoin = off;
revoke all on function comms.count_send_sms_failed_attempts(bigint) from public;
