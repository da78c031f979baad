-- Error handler: {original_payload, error, error_class}. The attempt's failure fact, with its
-- class: 'permanent' when the worker says retrying the request cannot succeed (the provider's
-- answer, docs/providers.md), else 'retriable' (also when the class is missing: an earlier
-- worker). The supervisor is woken to decide: a permanent failure ends the process at once; after
-- a retriable one, a retry after the backoff, or giving up. Idempotent; never raises on a normal
-- failure.
create or replace function comms.record_sms_failure(_payload jsonb) returns jsonb
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
    set plan_cache_mode = force_custom_plan as $$
declare
    _attempt_id bigint := (_payload #>> '{original_payload,send_sms_attempt_id}')::bigint;
    _id         bigint;
begin
    select send_sms_task_id into _id from comms.send_sms_attempt where send_sms_attempt_id = _attempt_id;
    if not found then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('record_sms_failure: send_sms_attempt %s does not exist', coalesce(_attempt_id::text, 'NULL')));
    end if;
    insert into comms.send_sms_attempt_failed (send_sms_attempt_id, error_message, error_class)
    values (_attempt_id, left(coalesce(nullif(_payload ->> 'error', ''), 'unknown error'), 8192),
            case when _payload ->> 'error_class' = 'permanent' then 'permanent' else 'retriable' end)
    on conflict do nothing;
    perform comms.wake_send_sms(_id, now());
    return jsonb_build_object('success', true);
end $$;
alter function comms.record_sms_failure(jsonb) reset plan_cache_mode;
alter function comms.record_sms_failure(jsonb) set enable_seqscan = off;
alter function comms.record_sms_failure(jsonb) set enable_hashjoin = off;
alter function comms.record_sms_failure(jsonb) set enable_mergejoin = off;
revoke all on function comms.record_sms_failure(jsonb) from public;
grant execute on function comms.record_sms_failure(jsonb) to worker_service_user;
