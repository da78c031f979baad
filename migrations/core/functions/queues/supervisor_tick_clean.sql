-- Called by a tick before it reads its due instances: true when no wake-up of _supervisor is in
-- flight (the next statement sees every instance made due so far); false when one is, and then
-- a follow-up tick is scheduled _retry from now, so the instances it makes due are not left
-- waiting for their next check.
create or replace function queues.supervisor_tick_clean(_supervisor text, _retry interval default interval '50 milliseconds') returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if pg_try_advisory_lock(internal.supervisor_lock_id(_supervisor)) then
        perform pg_advisory_unlock(internal.supervisor_lock_id(_supervisor));
        return true;
    end if;
    perform internal.schedule_supervisor_tick(_supervisor, now() + coalesce(_retry, interval '0'));
    return false;
end $$;
revoke all on function queues.supervisor_tick_clean(text, interval) from public;
