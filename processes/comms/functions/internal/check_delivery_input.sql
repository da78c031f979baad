-- Checks what the delivery functions share; raises 22023 naming the function and the field.
create or replace function internal.check_delivery_input(_label text, _provider_message_id text, _payload jsonb) returns void
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
revoke all on function internal.check_delivery_input(text, text, jsonb) from public;
