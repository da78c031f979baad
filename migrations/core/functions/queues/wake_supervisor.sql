-- Wakes _supervisor (a db_function name, schema.function) by _at (now by default): call it in
-- the transaction that made an instance of its process due. Raises invalid_parameter_value for
-- a name that is not schema.function.
create or replace function queues.wake_supervisor(_supervisor text, _at timestamptz default now()) returns void
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _supervisor is null or _supervisor !~ '^[a-z_][a-z0-9_$]*\.[a-z_][a-z0-9_$]*$' then
        raise exception 'wake_supervisor: the supervisor must be a schema.function name, got %',
            coalesce(quote_literal(left(_supervisor, 100)), 'NULL') using errcode = 'invalid_parameter_value';
    end if;
    perform pg_advisory_xact_lock_shared(internal.supervisor_lock_id(_supervisor));
    perform internal.schedule_supervisor_tick(_supervisor, _at);
end $$;
revoke all on function queues.wake_supervisor(text, timestamp with time zone) from public;
