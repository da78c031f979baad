create or replace function comms.count_send_email_attempts(_send_email_task_id bigint) returns integer
language plpgsql stable set search_path = pg_catalog, pg_temp set plan_cache_mode = force_custom_plan as $$
begin
    return (select count(*)::integer from comms.send_email_attempt a
            where a.send_email_task_id = _send_email_task_id
              and a.send_email_attempt_id > coalesce((select max(z.last_attempt_id) from comms.send_email_task_restarted z
                                                 where z.send_email_task_id = _send_email_task_id), 0));
end $$;
alter function comms.count_send_email_attempts(bigint) reset plan_cache_mode;
alter function comms.count_send_email_attempts(bigint) set enable_seqscan = off;
alter function comms.count_send_email_attempts(bigint) set enable_hashjoin = off;
alter function comms.count_send_email_attempts(bigint) set enable_mergejoin = off;
alter function comms.count_send_email_attempts(bigint) reset plan_cache_mode;
alter function comms.count_send_email_attempts(bigint) set enable_seqscan = off;
alter function comms.count_send_email_attempts(bigint) set enable_hashjoin = off;
alter function comms.count_send_email_attempts(bigint) set enable_mergejoin = off;
revoke all on function comms.count_send_email_attempts(bigint) from public;
