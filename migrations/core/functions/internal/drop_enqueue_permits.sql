-- Drops the current transaction's permits: the insert functions call it once their tasks are in.
create or replace function internal.drop_enqueue_permits() returns void
language sql security definer set search_path = pg_catalog, pg_temp as $$
    delete from queues.enqueue_permit where permit_xid = pg_current_xact_id()
$$;
revoke all on function internal.drop_enqueue_permits() from public;
