-- When an instance waits until (its instances view: 'waiting' with this time, 'running' when
-- null): the agenda's time, while no attempt is outstanding and that time is ahead (a backoff, a
-- scheduled send, a delivery report awaited).
create or replace function comms.send_sms_wait_until(_send_sms_task_id bigint) returns timestamptz
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select d.due_at from comms.send_sms_due d
    where d.send_sms_task_id = _send_sms_task_id and d.due_at > now()
      and not exists (select 1 from comms.send_sms_attempt a
                      where a.send_sms_task_id = _send_sms_task_id
                        and not exists (select 1 from comms.send_sms_attempt_succeeded s where s.send_sms_attempt_id = a.send_sms_attempt_id)
                        and not exists (select 1 from comms.send_sms_attempt_failed f where f.send_sms_attempt_id = a.send_sms_attempt_id))
$$;
revoke all on function comms.send_sms_wait_until(bigint) from public;
