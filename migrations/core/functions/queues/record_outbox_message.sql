-- Records one outbox delivery. The recipient is the request's "to" (email, SMS) or
-- "bucket/object_key" (file deletion). Returns {status: "sent"|"failed", outbox_message_id,
-- error}: "failed" when a rule says so, and the failure is recorded too.
create or replace function queues.record_outbox_message(_task_id bigint, _channel text, _request jsonb) returns jsonb
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _recipient text;
    _rule      queues.outbox_rule;
    _status    text := 'sent';
    _error     text;
    _id        bigint;
begin
    if _channel is null or _channel not in ('email', 'sms', 'file_delete') then
        raise exception 'record_outbox_message: unknown channel %', coalesce(_channel, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _request is null or jsonb_typeof(_request) <> 'object' then
        raise exception 'record_outbox_message: the request must be a JSON object'
            using errcode = 'invalid_parameter_value';
    end if;
    _recipient := case _channel
        when 'file_delete' then (_request ->> 'bucket') || '/' || (_request ->> 'object_key')
        else _request ->> 'to'
    end;

    select * into _rule from queues.outbox_rule r where r.channel = _channel and r.recipient = _recipient;
    if found then
        -- Serialise deliveries to one ruled recipient so "once" means once.
        perform pg_advisory_xact_lock(hashtext('taskorch.outbox'), hashtext(_channel || ':' || _recipient));
        if _rule.fail = 'always'
           or not exists (select 1 from queues.outbox_message m
                          where m.channel = _channel and m.recipient = _recipient and m.status = 'failed') then
            _status := 'failed';
            _error := _rule.error_message;
        end if;
    end if;

    insert into queues.outbox_message (task_id, channel, recipient, request, status, error)
    values (_task_id, _channel, _recipient, _request, _status, _error)
    returning outbox_message_id into _id;

    return jsonb_build_object('status', _status, 'outbox_message_id', _id, 'error', _error);
end $$;
revoke all on function queues.record_outbox_message(bigint, text, jsonb) from public;
grant execute on function queues.record_outbox_message(bigint, text, jsonb) to worker_service_user;
