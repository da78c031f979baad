-- Records what the provider said of an email it accepted: _event is email.delivered,
-- email.bounced or email.complained; _provider_message_id the id the provider gave the message
-- (send_email_attempt_succeeded.provider_response ->> 'id'); _reason the provider's words (a
-- bounce's message); _payload the provider's event, kept with the fact. Returns one row:
--   outcome 'recorded'        the fact is new: written, and signal _event emitted with key
--                             send_email_task_id (payload {send_email_attempt_id, provider_message_id, reason})
--   outcome 'duplicate'       the same fact was recorded before: nothing changed
--   outcome 'unknown_attempt' no attempt has that id: recorded in queues.error, nothing else
-- Bad input (an empty id, another event, a payload that is not an object) raises 22023.
create or replace function comms.record_email_delivery(
    _provider_message_id text,
    _event text,
    _reason text default null,
    _payload jsonb default '{}')
returns table (outcome text, send_email_attempt_id bigint, send_email_task_id bigint)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _attempt bigint;
    _task    bigint;
    _new     boolean;
begin
    perform internal.check_delivery_input('record_email_delivery', _provider_message_id, _payload);
    if _event is null or _event not in ('email.delivered', 'email.bounced', 'email.complained') then
        raise exception 'record_email_delivery: event must be email.delivered, email.bounced or email.complained, got %',
            coalesce(quote_literal(left(_event, 100)), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    _payload := coalesce(_payload, '{}');
    _reason := left(nullif(btrim(_reason), ''), 8192);

    select a.send_email_attempt_id, a.send_email_task_id into _attempt, _task
    from comms.send_email_attempt_succeeded s
    join comms.send_email_attempt a on a.send_email_attempt_id = s.send_email_attempt_id
    where s.provider_response ->> 'id' = _provider_message_id
    order by a.send_email_attempt_id desc limit 1;
    if not found then
        perform internal.record_unknown_delivery('record_email_delivery', 'email', _provider_message_id, _event);
        return query select 'unknown_attempt'::text, null::bigint, null::bigint;
        return;
    end if;

    if _event = 'email.delivered' then
        insert into comms.send_email_attempt_delivered (send_email_attempt_id, provider_message_id, payload)
        values (_attempt, _provider_message_id, _payload)
        on conflict do nothing;
    else
        insert into comms.send_email_attempt_bounced (send_email_attempt_id, kind, reason, provider_message_id, payload)
        values (_attempt, substr(_event, 7), _reason, _provider_message_id, _payload)
        on conflict do nothing;
    end if;
    _new := found;
    if _new then
        perform queues.signal(_event, _task::text, jsonb_strip_nulls(jsonb_build_object(
            'send_email_attempt_id', _attempt, 'provider_message_id', _provider_message_id, 'reason', _reason)));
    end if;
    return query select case when _new then 'recorded' else 'duplicate' end, _attempt, _task;
end $$;
revoke all on function comms.record_email_delivery(text, text, text, jsonb) from public;
grant execute on function comms.record_email_delivery(text, text, text, jsonb) to worker_service_user;
