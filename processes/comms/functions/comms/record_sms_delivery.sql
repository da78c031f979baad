-- Records what the provider said of an SMS it accepted: _status is delivered, undelivered or
-- failed (Twilio's MessageStatus); _provider_message_id the message's id
-- (send_sms_attempt_succeeded.provider_response ->> 'sid'); _error_code and _reason the
-- provider's error, when it gave one. Returns one row as comms.record_email_delivery does; a new
-- fact emits signal 'sms.' || _status with key send_sms_task_id (payload {send_sms_attempt_id,
-- provider_message_id, error_code, reason}). Bad input raises 22023.
create or replace function comms.record_sms_delivery(
    _provider_message_id text,
    _status text,
    _error_code text default null,
    _reason text default null,
    _payload jsonb default '{}')
returns table (outcome text, send_sms_attempt_id bigint, send_sms_task_id bigint)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _attempt bigint;
    _task    bigint;
    _new     boolean;
begin
    perform internal.check_delivery_input('record_sms_delivery', _provider_message_id, _payload);
    if _status is null or _status not in ('delivered', 'undelivered', 'failed') then
        raise exception 'record_sms_delivery: status must be delivered, undelivered or failed, got %',
            coalesce(quote_literal(left(_status, 100)), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    _payload := coalesce(_payload, '{}');
    _error_code := left(nullif(btrim(_error_code), ''), 64);
    _reason := left(nullif(btrim(_reason), ''), 8192);

    select a.send_sms_attempt_id, a.send_sms_task_id into _attempt, _task
    from comms.send_sms_attempt_succeeded s
    join comms.send_sms_attempt a on a.send_sms_attempt_id = s.send_sms_attempt_id
    where s.provider_response ->> 'sid' = _provider_message_id
    order by a.send_sms_attempt_id desc limit 1;
    if not found then
        perform internal.record_unknown_delivery('record_sms_delivery', 'SMS', _provider_message_id, 'sms.' || _status);
        return query select 'unknown_attempt'::text, null::bigint, null::bigint;
        return;
    end if;

    if _status = 'delivered' then
        insert into comms.send_sms_attempt_delivered (send_sms_attempt_id, provider_message_id, payload)
        values (_attempt, _provider_message_id, _payload)
        on conflict do nothing;
    else
        insert into comms.send_sms_attempt_undelivered (send_sms_attempt_id, status, error_code, reason, provider_message_id, payload)
        values (_attempt, _status, _error_code, _reason, _provider_message_id, _payload)
        on conflict do nothing;
    end if;
    _new := found;
    if _new then
        perform queues.signal('sms.' || _status, _task::text, jsonb_strip_nulls(jsonb_build_object(
            'send_sms_attempt_id', _attempt, 'provider_message_id', _provider_message_id,
            'error_code', _error_code, 'reason', _reason)));
    end if;
    return query select case when _new then 'recorded' else 'duplicate' end, _attempt, _task;
end $$;
revoke all on function comms.record_sms_delivery(text, text, text, text, jsonb) from public;
grant execute on function comms.record_sms_delivery(text, text, text, text, jsonb) to worker_service_user;
