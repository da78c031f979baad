-- Creates an email message and starts sending it (at _scheduled_at: a precise future time is
-- honoured). Returns the send_email_task_id. Invalid input raises invalid_parameter_value
-- (SQLSTATE 22023) with a message naming the field.
create or replace function comms.send_email(
    _to text,
    _subject text,
    _text text default null,
    _html text default null,
    _scheduled_at timestamptz default now())
returns bigint
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _message_id bigint;
    _k record;
begin
    if _to is null or _to !~ '^[^@\s<>,;]+@[^@\s<>,;]+\.[^@\s<>,;]+$' or length(_to) > 320 then
        raise exception 'send_email: _to must be one email address, got %', coalesce(quote_literal(left(_to, 100)), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _subject is null or btrim(_subject) = '' or length(_subject) > 998 or _subject ~ '[\r\n]' then
        raise exception 'send_email: _subject must be one non-empty line of at most 998 characters'
            using errcode = 'invalid_parameter_value';
    end if;
    if _text is null and _html is null then
        raise exception 'send_email: give _text, _html or both' using errcode = 'invalid_parameter_value';
    end if;

    insert into comms.message (channel) values ('email') returning message_id into _message_id;
    insert into comms.email_message (message_id, to_address, subject, text_body, html_body)
    values (_message_id, _to, _subject, _text, _html);

    select * into _k from comms.kickoff_send_email(_message_id, _scheduled_at);
    if _k.validation_failure_message is not null then
        raise exception '%', _k.validation_failure_message using errcode = 'invalid_parameter_value';
    end if;
    return _k.send_email_task_id;
end $$;
revoke all on function comms.send_email(text, text, text, text, timestamp with time zone) from public;
