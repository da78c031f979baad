-- Records a refused provider callback (a bad signature, an old timestamp, a body too large or
-- not JSON) in queues.error, with no task: _provider names the sender (resend, twilio, ...),
-- _reason says why, _context (a JSON object, at most 8 KiB, else replaced by a note) says what
-- came. The message is bounded to 8 KiB. An empty provider or reason raises 22023.
create or replace function comms.record_webhook_refusal(_provider text, _reason text, _context jsonb default '{}') returns void
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
revoke all on function comms.record_webhook_refusal(text, text, jsonb) from public;
grant execute on function comms.record_webhook_refusal(text, text, jsonb) to worker_service_user;
