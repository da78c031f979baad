-- Records event (_name, _key) with _payload (a JSON object) once and makes the tasks waiting
-- for it due now. True when this call recorded it; false when it had arrived already (the first
-- emit's payload stays, nothing changes). Bad input raises 22023 and writes nothing.
create or replace function queues.signal(_name text, _key text, _payload jsonb default '{}') returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _waiting bigint[];
begin
    perform internal.check_signal_key('signal', _name, _key);
    if _payload is null or jsonb_typeof(_payload) <> 'object' then
        raise exception 'signal: payload must be a JSON object, got %', coalesce(jsonb_typeof(_payload), 'null')
            using errcode = 'invalid_parameter_value';
    end if;
    if pg_column_size(_payload) > internal.max_payload_bytes() then
        raise exception 'signal: payload is % bytes, over the limit of % bytes (8 MiB) per signal',
            pg_column_size(_payload), internal.max_payload_bytes()
            using errcode = 'invalid_parameter_value',
                  hint = 'Store large data elsewhere (a table, object storage) and put its key in the payload.';
    end if;

    perform internal.lock_signal(_name, _key);
    insert into queues.signal (name, key, payload) values (_name, _key, _payload)
    on conflict (name, key) do nothing;
    if not found then
        return false;
    end if;

    with gone as (
        delete from queues.signal_wait w where w.name = _name and w.key = _key returning w.task_id
    )
    select array_agg(g.task_id) into _waiting from gone g;
    if _waiting is not null then
        perform internal.wake_signal_waiters(_waiting, _name, _key);
    end if;
    return true;
end $$;
revoke all on function queues.signal(text, text, jsonb) from public;
