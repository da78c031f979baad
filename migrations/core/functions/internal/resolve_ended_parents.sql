-- Trigger of queues.task (task_parents_resolve: after update of status, per statement): counts the
-- parents the statement ended (noted by internal.note_ended_parent) for their children, all in
-- one internal.resolve_parents call, so the statement that ends a parent releases or cancels its
-- children in its own transaction. A statement that ended no parent reads one setting.
create or replace function internal.resolve_ended_parents() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _noted text := current_setting('taskorch.ended_parents', true);
begin
    if _noted is null or _noted = '' then
        return null;
    end if;
    perform set_config('taskorch.ended_parents', '', true);
    perform internal.resolve_parents(array_agg(split_part(e, ':', 1)::bigint order by split_part(e, ':', 1)::bigint),
                                     array_agg(split_part(e, ':', 2)::queues.task_status order by split_part(e, ':', 1)::bigint))
    from unnest(string_to_array(rtrim(_noted, ','), ',')) as e;
    return null;
end $$;
revoke all on function internal.resolve_ended_parents() from public;
