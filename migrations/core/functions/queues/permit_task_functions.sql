-- Asks for the permit the tasks need: one row naming every distinct function they name. Runs as
-- its caller (the enqueue functions call it), so the check is against the caller's rights. A
-- malformed shape is left to the insert, which says what is wrong with it.
create or replace function queues.permit_task_functions(_task_types text[], _payloads jsonb[]) returns void
language plpgsql security invoker set search_path = pg_catalog, pg_temp as $$
declare
    _names text[];
begin
    select array_agg(distinct v.name order by v.name) into _names
    from unnest(_task_types, _payloads) as u(task_type, payload)
    cross join lateral (
        select u.payload ->> 'db_function' as name
        where u.task_type = 'db_function' and jsonb_typeof(u.payload -> 'db_function') = 'string'
        union all
        select u.payload ->> k
        from unnest(array['before_handler', 'success_handler', 'error_handler']) k
        where u.task_type in ('email', 'sms', 'file_delete') and jsonb_typeof(u.payload -> k) = 'string'
    ) v
    where v.name <> '';
    if _names is not null then
        insert into queues.enqueue_permit (permit_xid, names, granted_to) values (pg_current_xact_id(), _names, current_user);
    end if;
end $$;
revoke all on function queues.permit_task_functions(text[], jsonb[]) from public;
comment on function queues.permit_task_functions(text[], jsonb[]) is 'Asks, as the caller, for a permit for the functions these tasks name; refused (42501) for a function the caller may not execute. The enqueue functions call it.';
