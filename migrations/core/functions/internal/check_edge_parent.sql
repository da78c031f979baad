-- Constraint trigger of queues.task_edge (task_edge_parent_check: after insert, deferred to the
-- commit of the transaction that named the parent): re-reads the parent FOR SHARE, which waits for
-- a completion of it that is committing, and counts a parent that ended after the child named it
-- but before this commit (its completion could not see the uncommitted edge). When the parent is
-- still running, its completion comes after this commit and counts the edge itself; whichever
-- side deletes the edge counts it (internal.resolve_parents), so it is counted once.
create or replace function internal.check_edge_parent() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _status queues.task_status;
begin
    select t.status into _status from queues.task t where t.task_id = new.parent_id for share;
    if _status in ('completed', 'failed', 'dead', 'cancelled') then
        perform internal.resolve_parents(array[new.parent_id], array[_status]);
    end if;
    return null;
end $$;
revoke all on function internal.check_edge_parent() from public;
