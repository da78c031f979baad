-- Gives the tasks a statement inserted their limit and bucket, when a limit governs them. One
-- EXISTS on an empty table per statement when no limit is set.
create or replace function internal.set_inserted_limit_keys() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    if not exists (select from queues.task_limit) then
        return null;
    end if;
    update queues.task t
    set limit_name = l.task_type, limit_key = internal.limit_key(l.key_field, t.payload)
    from inserted_tasks n
    cross join lateral (select * from internal.limit_of(n.task_type, n.payload)) l
    where t.task_id = n.task_id and l.task_type is not null;
    return null;
end $$;
revoke all on function internal.set_inserted_limit_keys() from public;
