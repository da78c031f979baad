-- Facts helper: whether an attempt of the instance's current run failed permanently (such a
-- run ends at once). PL/pgSQL: the restart facts it reads may be created after it.
create or replace function comms.has_send_sms_permanent_failure(_send_sms_task_id bigint) returns boolean
language plpgsql stable set search_path = pg_catalog, pg_temp as $$
begin
    return exists (select 1 from comms.send_sms_attempt a
                   join comms.send_sms_attempt_failed f using (send_sms_attempt_id)
                   where a.send_sms_task_id = _send_sms_task_id and f.error_class = 'permanent'
                     and a.send_sms_attempt_id > coalesce((select max(z.last_attempt_id) from comms.send_sms_task_restarted z
                                                        where z.send_sms_task_id = _send_sms_task_id), 0));
end $$;
revoke all on function comms.has_send_sms_permanent_failure(bigint) from public;
