-- Before handler: the provider request for one attempt. The idempotency key is derived from the
-- attempt (Twilio has no idempotency key: a re-run after a crash may send twice).
create or replace function comms.get_sms_payload(_payload jsonb) returns jsonb
language plpgsql stable security definer set search_path = pg_catalog, pg_temp
    set enable_seqscan = off set enable_hashjoin = off set enable_mergejoin = off as $$
declare
    _attempt_id bigint;
    _r record;
begin
    if jsonb_typeof(_payload -> 'send_sms_attempt_id') is distinct from 'number' then
        return jsonb_build_object('success', false,
            'validation_failure_message', 'get_sms_payload: payload needs a numeric send_sms_attempt_id');
    end if;
    _attempt_id := (_payload ->> 'send_sms_attempt_id')::bigint;
    select m.*, a.send_sms_task_id into _r
    from comms.send_sms_attempt a
    join comms.send_sms_task t using (send_sms_task_id)
    join comms.sms_message m using (message_id)
    where a.send_sms_attempt_id = _attempt_id;
    if not found then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('get_sms_payload: send_sms_attempt %s does not exist', _attempt_id));
    end if;
    if comms.has_send_sms_succeeded_attempt(_r.send_sms_task_id) then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('get_sms_payload: send_sms_task %s was already sent; not sending twice', _r.send_sms_task_id));
    end if;
    return jsonb_build_object('success', true, 'payload', jsonb_strip_nulls(jsonb_build_object(
        'to', _r.to_number,
        'from', _r.from_number,
        'body', _r.body,
        'message_id', _r.message_id,
        'send_sms_attempt_id', _attempt_id,
        'idempotency_key', 'comms-send-sms-attempt-' || _attempt_id)));
end $$;
revoke all on function comms.get_sms_payload(jsonb) from public;
grant execute on function comms.get_sms_payload(jsonb) to worker_service_user;
