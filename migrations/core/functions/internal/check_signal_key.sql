-- Validates a signal's name and key; raises 22023 with a message that says what is wrong.
create or replace function internal.check_signal_key(_label text, _name text, _key text) returns void
language plpgsql immutable set search_path = pg_catalog, pg_temp as $$
begin
    if _name is null or _name = '' then
        raise exception '%: name must not be empty', _label using errcode = 'invalid_parameter_value';
    end if;
    if length(_name) > 128 then
        raise exception '%: name is % characters, over the limit of 128', _label, length(_name)
            using errcode = 'invalid_parameter_value';
    end if;
    if _key is null or _key = '' then
        raise exception '%: key must not be empty', _label using errcode = 'invalid_parameter_value';
    end if;
    if length(_key) > 512 then
        raise exception '%: key is % characters, over the limit of 512', _label, length(_key)
            using errcode = 'invalid_parameter_value';
    end if;
end $$;
revoke all on function internal.check_signal_key(text, text, text) from public;
