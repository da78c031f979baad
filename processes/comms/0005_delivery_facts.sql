-- Delivery facts: what the provider said happened to a message after it accepted it
-- (docs/providers.md, "Delivery webhooks"; docs/sql.md, "Delivery facts").
--
--   comms.record_email_delivery(id, event, reason, payload)           a delivered/bounced/complained email
--   comms.record_sms_delivery(sid, status, error_code, reason, payload) a delivered/undelivered/failed SMS
--   comms.record_webhook_refusal(provider, reason, context)           a refused callback, in queues.error
--
-- A provider's callback names the message by the id the provider gave it when it accepted it:
-- the success handlers stored that answer in *_attempt_succeeded.provider_response (Resend
-- {"id": ...}, Twilio {"sid": ...}). Each function finds the attempt by that id, records one
-- fact on it and emits a signal (queues.signal) keyed by the process (send_email_task_id or
-- send_sms_task_id as text), all in the caller's transaction. A repeated callback finds the fact
-- already there and changes nothing. An id no attempt has is recorded in queues.error and
-- nothing else is written. The functions do not end the process: supervisors read the facts.

create table comms.send_email_attempt_delivered (
    send_email_attempt_id bigint primary key references comms.send_email_attempt,
    provider_message_id   text not null,
    payload               jsonb not null default '{}',   -- the provider's event, as received
    created_at            timestamptz not null default now()
);
comment on table comms.send_email_attempt_delivered is
    'Append-only: the provider reported the attempt''s email delivered (comms.record_email_delivery).';

-- kind: bounced (the recipient's server refused it for good) or complained (marked as spam).
create table comms.send_email_attempt_bounced (
    send_email_attempt_id bigint not null references comms.send_email_attempt,
    kind                  text not null,
    reason                text,                          -- the provider's words, when it gave some
    provider_message_id   text not null,
    payload               jsonb not null default '{}',
    created_at            timestamptz not null default now(),
    primary key (send_email_attempt_id, kind),
    constraint send_email_attempt_bounced_kind check (kind in ('bounced', 'complained'))
);
comment on table comms.send_email_attempt_bounced is
    'Append-only: the provider reported the attempt''s email bounced or complained of (comms.record_email_delivery).';

create table comms.send_sms_attempt_delivered (
    send_sms_attempt_id bigint primary key references comms.send_sms_attempt,
    provider_message_id text not null,
    payload             jsonb not null default '{}',
    created_at          timestamptz not null default now()
);
comment on table comms.send_sms_attempt_delivered is
    'Append-only: the provider reported the attempt''s SMS delivered (comms.record_sms_delivery).';

-- status: undelivered (the carrier could not deliver it) or failed (it was never sent).
create table comms.send_sms_attempt_undelivered (
    send_sms_attempt_id bigint not null references comms.send_sms_attempt,
    status              text not null,
    error_code          text,                            -- Twilio's ErrorCode, when it gave one
    reason              text,
    provider_message_id text not null,
    payload             jsonb not null default '{}',
    created_at          timestamptz not null default now(),
    primary key (send_sms_attempt_id, status),
    constraint send_sms_attempt_undelivered_status check (status in ('undelivered', 'failed'))
);
comment on table comms.send_sms_attempt_undelivered is
    'Append-only: the provider reported the attempt''s SMS undelivered or failed (comms.record_sms_delivery).';

create trigger send_email_attempt_delivered_append_only before update on comms.send_email_attempt_delivered
    for each statement execute function internal.refuse_fact_update();
create trigger send_email_attempt_bounced_append_only before update on comms.send_email_attempt_bounced
    for each statement execute function internal.refuse_fact_update();
create trigger send_sms_attempt_delivered_append_only before update on comms.send_sms_attempt_delivered
    for each statement execute function internal.refuse_fact_update();
create trigger send_sms_attempt_undelivered_append_only before update on comms.send_sms_attempt_undelivered
    for each statement execute function internal.refuse_fact_update();

-- The lookups by the provider's message id: an index, not a scan of every sent message.
create index send_email_attempt_succeeded_provider_id_idx
    on comms.send_email_attempt_succeeded ((provider_response ->> 'id'));
create index send_sms_attempt_succeeded_provider_sid_idx
    on comms.send_sms_attempt_succeeded ((provider_response ->> 'sid'));

-- Checks what the delivery functions share; raises 22023 naming the function and the field.
create function internal.check_delivery_input(_label text, _provider_message_id text, _payload jsonb) returns void
language plpgsql immutable set search_path = pg_catalog, pg_temp as $$
begin
    if _provider_message_id is null or btrim(_provider_message_id) = '' then
        raise exception '%: the provider message id must not be empty', _label using errcode = 'invalid_parameter_value';
    end if;
    if length(_provider_message_id) > 256 then
        raise exception '%: the provider message id is % characters, over the limit of 256', _label, length(_provider_message_id)
            using errcode = 'invalid_parameter_value';
    end if;
    if _payload is not null and jsonb_typeof(_payload) <> 'object' then
        raise exception '%: payload must be a JSON object, got %', _label, jsonb_typeof(_payload)
            using errcode = 'invalid_parameter_value';
    end if;
    if pg_column_size(_payload) > 1048576 then
        raise exception '%: payload is % bytes, over the limit of 1 MiB', _label, pg_column_size(_payload)
            using errcode = 'invalid_parameter_value';
    end if;
end $$;

-- Records an unknown provider message id in queues.error (no task: it names none we know).
create function internal.record_unknown_delivery(_label text, _what text, _provider_message_id text, _event text) returns void
language sql volatile set search_path = pg_catalog, pg_temp as $$
    insert into queues.error (task_id, error_message, context)
    values (null,
            format('%s: no %s attempt has provider message id %s (event %s); nothing recorded',
                   _label, _what, quote_literal(left(_provider_message_id, 256)), _event),
            jsonb_build_object('source', _label, 'provider_message_id', left(_provider_message_id, 256), 'event', _event));
$$;

-- Records what the provider said of an email it accepted: _event is email.delivered,
-- email.bounced or email.complained; _provider_message_id the id the provider gave the message
-- (send_email_attempt_succeeded.provider_response ->> 'id'); _reason the provider's words (a
-- bounce's message); _payload the provider's event, kept with the fact. Returns one row:
--   outcome 'recorded'        the fact is new: written, and signal _event emitted with key
--                             send_email_task_id (payload {send_email_attempt_id, provider_message_id, reason})
--   outcome 'duplicate'       the same fact was recorded before: nothing changed
--   outcome 'unknown_attempt' no attempt has that id: recorded in queues.error, nothing else
-- Bad input (an empty id, another event, a payload that is not an object) raises 22023.
create function comms.record_email_delivery(
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

-- Records what the provider said of an SMS it accepted: _status is delivered, undelivered or
-- failed (Twilio's MessageStatus); _provider_message_id the message's id
-- (send_sms_attempt_succeeded.provider_response ->> 'sid'); _error_code and _reason the
-- provider's error, when it gave one. Returns one row as comms.record_email_delivery does; a new
-- fact emits signal 'sms.' || _status with key send_sms_task_id (payload {send_sms_attempt_id,
-- provider_message_id, error_code, reason}). Bad input raises 22023.
create function comms.record_sms_delivery(
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

-- Records a refused provider callback (a bad signature, an old timestamp, a body too large or
-- not JSON) in queues.error, with no task: _provider names the sender (resend, twilio, ...),
-- _reason says why, _context (a JSON object, at most 8 KiB, else replaced by a note) says what
-- came. The message is bounded to 8 KiB. An empty provider or reason raises 22023.
create function comms.record_webhook_refusal(_provider text, _reason text, _context jsonb default '{}') returns void
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _provider is null or btrim(_provider) = '' or length(_provider) > 64 then
        raise exception 'record_webhook_refusal: provider must be 1 to 64 characters' using errcode = 'invalid_parameter_value';
    end if;
    if _reason is null or btrim(_reason) = '' then
        raise exception 'record_webhook_refusal: reason must not be empty' using errcode = 'invalid_parameter_value';
    end if;
    if _context is null or jsonb_typeof(_context) <> 'object' then
        _context := '{}';
    elsif pg_column_size(_context) > 8192 then
        _context := jsonb_build_object('context_dropped', format('%s bytes, over 8 KiB', pg_column_size(_context)));
    end if;
    insert into queues.error (task_id, error_message, context)
    values (null, left(format('webhook %s refused: %s', _provider, _reason), 8192),
            _context || jsonb_build_object('source', 'webhook', 'provider', _provider));
end $$;

-- Grants ------------------------------------------------------------------------------------
-- Nothing here is executable by PUBLIC and no table is readable by the worker. The webhook
-- ingress runs as the worker role (taskorch worker, taskorch webhooks) and may execute the three
-- recording functions, nothing more: they write the facts, the signal and the refusals as their
-- owner.
revoke all on table
    comms.send_email_attempt_delivered,
    comms.send_email_attempt_bounced,
    comms.send_sms_attempt_delivered,
    comms.send_sms_attempt_undelivered
from public;
revoke all on function
    internal.check_delivery_input(text, text, jsonb),
    internal.record_unknown_delivery(text, text, text, text),
    comms.record_email_delivery(text, text, text, jsonb),
    comms.record_sms_delivery(text, text, text, text, jsonb),
    comms.record_webhook_refusal(text, text, jsonb)
from public;
grant execute on function
    comms.record_email_delivery(text, text, text, jsonb),
    comms.record_sms_delivery(text, text, text, text, jsonb),
    comms.record_webhook_refusal(text, text, jsonb)
to worker_service_user;
