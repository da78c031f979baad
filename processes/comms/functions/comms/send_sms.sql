-- Creates an SMS message and starts sending it (at _scheduled_at: a precise future time is
-- honoured). Returns the send_sms_task_id. Invalid input raises invalid_parameter_value
-- (SQLSTATE 22023) with a message naming the field.
create or replace function comms.send_sms(
    _to text,
    _body text,
    _scheduled_at timestamptz default now())
returns bigint
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _message_id bigint;
    _k record;
begin
    if _to is null or _to !~ '^\+[1-9][0-9]{6,14}$' then
        raise exception 'send_sms: _to must be a phone number in E.164 form (+ and 7 to 15 digits), got %',
            coalesce(quote_literal(left(_to, 100)), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _body is null or btrim(_body) = '' or length(_body) > 1600 then
        raise exception 'send_sms: _body must be 1 to 1600 characters' using errcode = 'invalid_parameter_value';
    end if;

    insert into comms.message (channel) values ('sms') returning message_id into _message_id;
    insert into comms.sms_message (message_id, to_number, body) values (_message_id, _to, _body);

    select * into _k from comms.kickoff_send_sms(_message_id, _scheduled_at);
    if _k.validation_failure_message is not null then
        raise exception '%', _k.validation_failure_message using errcode = 'invalid_parameter_value';
    end if;
    return _k.send_sms_task_id;
end $$;
revoke all on function comms.send_sms(text, text, timestamp with time zone) from public;
