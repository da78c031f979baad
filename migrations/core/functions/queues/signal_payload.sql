-- The payload of signal (_name, _key), or NULL when it has not arrived: a supervisor's
-- "has X for K arrived?".
create or replace function queues.signal_payload(_name text, _key text) returns jsonb
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select s.payload from queues.signal s where s.name = _name and s.key = _key
$$;
revoke all on function queues.signal_payload(text, text) from public;
