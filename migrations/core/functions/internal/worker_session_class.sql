-- The class of the workers' session locks (the first key of pg_advisory_lock(int, int)):
-- 'task' in ASCII. The second key is queues.worker.session_key.
create or replace function internal.worker_session_class() returns integer
language sql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
    select 1952543595
$$;
revoke all on function internal.worker_session_class() from public;
