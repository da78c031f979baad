-- Before handler: the provider request for one attempt. The idempotency key is derived from the
-- attempt, so a re-run of the same attempt after a crash is deduplicated by providers that
-- honour keys (Resend).
create or replace function comms.get_email_payload(_payload jsonb) returns jsonb
language plpgsql stable security definer set search_path = pg_catalog, pg_temp
    set enable_seqscan = off set enable_hashjoin = off set enable_mergejoin = off as $$
declare
    _attempt_id bigint;
    _r record;
begin
    if jsonb_typeof(_payload -> 'send_email_attempt_id') is distinct from 'number' then
        return jsonb_build_object('success', false,
            'validation_failure_message', 'get_email_payload: payload needs a numeric send_email_attempt_id');
    end if;
    _attempt_id := (_payload ->> 'send_email_attempt_id')::bigint;
    select m.*, a.send_email_task_id into _r
    from comms.send_email_attempt a
    join comms.send_email_task t using (send_email_task_id)
    join comms.email_message m using (message_id)
    where a.send_email_attempt_id = _attempt_id;
    if not found then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('get_email_payload: send_email_attempt %s does not exist', _attempt_id));
    end if;
    if comms.has_send_email_succeeded_attempt(_r.send_email_task_id) then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('get_email_payload: send_email_task %s was already sent; not sending twice', _r.send_email_task_id));
    end if;
    return jsonb_build_object('success', true, 'payload', jsonb_strip_nulls(jsonb_build_object(
        'to', _r.to_address,
        'from', _r.from_address,
        'subject', _r.subject,
        'text', _r.text_body,
        'html', _r.html_body,
        'message_id', _r.message_id,
        'send_email_attempt_id', _attempt_id,
        'idempotency_key', 'comms-send-email-attempt-' || _attempt_id)));
end $$;
revoke all on function comms.get_email_payload(jsonb) from public;
grant execute on function comms.get_email_payload(jsonb) to worker_service_user;
