-- The bucket of a payload under a limit whose key field is _key_field (NULL: no key field).
create or replace function internal.limit_key(_key_field text, _payload jsonb) returns text
language sql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
    select case
        when _key_field is null then ''
        when jsonb_typeof(_payload -> _key_field) in ('string', 'number', 'boolean') then '=' || (_payload ->> _key_field)
        else '*'
    end
$$;
revoke all on function internal.limit_key(text, jsonb) from public;
