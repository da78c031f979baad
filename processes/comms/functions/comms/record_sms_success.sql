-- Success handler: {original_payload, worker_payload}. The attempt's success fact, and (an
-- attempt that succeeded ends the process) the process's own: no supervisor run is needed.
-- Idempotent. The instance's agenda row is taken first, so a tick deciding the same instance
-- at the same time is waited for, and a terminal fact it recorded is seen.
create or replace function comms.record_sms_success(_payload jsonb) returns jsonb
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
    set plan_cache_mode = force_custom_plan as $$
declare
    _attempt_id bigint := (_payload #>> '{original_payload,send_sms_attempt_id}')::bigint;
    _id         bigint;
    _wait       interval;
begin
    select send_sms_task_id into _id from comms.send_sms_attempt where send_sms_attempt_id = _attempt_id;
    if not found then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('record_sms_success: send_sms_attempt %s does not exist', coalesce(_attempt_id::text, 'NULL')));
    end if;
    delete from comms.send_sms_due where send_sms_task_id = _id;
    insert into comms.send_sms_attempt_succeeded (send_sms_attempt_id, provider_response)
    values (_attempt_id, _payload -> 'worker_payload')
    on conflict do nothing;
    select c.delivery_wait into _wait from comms.process_config c where c.process = 'send_sms';
    if _wait is not null then
        -- Waiting for the provider's delivery report: the supervisor decides when it comes (a
        -- delivery fact wakes it) or when the wait ends.
        perform comms.wake_send_sms(_id, now() + _wait);
        return jsonb_build_object('success', true);
    end if;
    if not exists (select 1 from comms.send_sms_task_failed where send_sms_task_id = _id and run = comms.send_sms_run(_id)) then
        insert into comms.send_sms_task_succeeded (send_sms_task_id) values (_id) on conflict do nothing;
    end if;
    return jsonb_build_object('success', true);
end $$;
alter function comms.record_sms_success(jsonb) reset plan_cache_mode;
alter function comms.record_sms_success(jsonb) set enable_seqscan = off;
alter function comms.record_sms_success(jsonb) set enable_hashjoin = off;
alter function comms.record_sms_success(jsonb) set enable_mergejoin = off;
revoke all on function comms.record_sms_success(jsonb) from public;
grant execute on function comms.record_sms_success(jsonb) to worker_service_user;
