-- What a worker's row says of its session: 'none' when it has none on this server (no session,
-- or one registered before PostgreSQL restarted or failed over), 'alive' while a session holds
-- its lock, 'gone' once none does. The probe is a shared try-lock, held to the end of the
-- transaction when it succeeds (nobody else wants it: keys are never reused while held) and
-- never waiting. It must not run on the worker's own session, whose lock never conflicts with
-- itself.
create or replace function internal.worker_session_state(_session_key integer, _session_epoch timestamptz) returns text
language sql volatile set search_path = pg_catalog, pg_temp as $$
    select case
        when _session_key is null or _session_epoch is distinct from pg_postmaster_start_time() then 'none'
        when pg_try_advisory_xact_lock_shared(internal.worker_session_class(), _session_key) then 'gone'
        else 'alive'
    end
$$;
revoke all on function internal.worker_session_state(integer, timestamp with time zone) from public;
