-- The status of the tasks _task_ids names that the calling role may see: those enqueued by the
-- role its session acts as (session_user, or the role set by SET ROLE) or by a role it is a member
-- of (queues.task.enqueued_by). A task it may not see is left out exactly as a task that does not
-- exist: one row per distinct id it may see, none for the rest. At most 1,000 ids a call; NULL,
-- a NULL id or more ids raise 22023. SECURITY DEFINER: the caller reads no table
-- (docs/security.md, "Reading a task's status").
create or replace function queues.get_task_statuses(_task_ids bigint[])
returns table (task_id bigint, status queues.task_status, attempt integer, max_attempts integer,
               result jsonb, last_error text, enqueued_at timestamptz, run_at timestamptz,
               finished_at timestamptz)
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    _me name := coalesce(nullif(current_setting('role'), 'none'), session_user::text);
begin
    if _task_ids is null or cardinality(_task_ids) > 1000 then
        raise exception 'get_task_statuses: _task_ids must hold 0 to 1,000 task ids, got %', coalesce(cardinality(_task_ids)::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if array_position(_task_ids, null) is not null then
        raise exception 'get_task_statuses: _task_ids must not hold NULL' using errcode = 'invalid_parameter_value';
    end if;
    return query
    select t.task_id, t.status, t.attempt, t.max_attempts, t.result, t.last_error, t.enqueued_at, t.run_at,
           case t.status when 'completed' then t.completed_at when 'failed' then t.failed_at
                         when 'dead' then t.dead_at when 'cancelled' then t.cancelled_at end
    from queues.task t
    -- A role dropped since has no row here: its tasks are nobody's (pg_has_role would raise).
    join pg_catalog.pg_roles r on r.rolname = t.enqueued_by
    where t.task_id = any (_task_ids)
      and pg_has_role(_me, r.oid, 'MEMBER')
    order by t.task_id;
end $$;
revoke all on function queues.get_task_statuses(bigint[]) from public;
comment on function queues.get_task_statuses(bigint[]) is
    'The status, attempts, result, last error and times of up to 1,000 tasks the calling role may see (enqueued by the role its session acts as, or by a role it is a member of); a task it may not see is left out as one that does not exist.';
