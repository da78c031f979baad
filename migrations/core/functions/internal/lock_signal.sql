-- The lock that orders queues.signal and queues.wait_for_signal on one (name, key).
create or replace function internal.lock_signal(_name text, _key text) returns void
language sql volatile set search_path = pg_catalog, pg_temp as $$
    select pg_advisory_xact_lock(hashtext('taskorch.signal'), hashtext(_name || ':' || _key))
$$;
revoke all on function internal.lock_signal(text, text) from public;
