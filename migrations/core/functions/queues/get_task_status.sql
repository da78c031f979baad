-- The status of one task the calling role may see (queues.get_task_statuses): one row, or none for a
-- task it may not see exactly as for one that does not exist. A NULL id raises 22023. (Not
-- queues.task_status: that is the status type's name, and task_status($1) with an untyped
-- parameter would parse as a cast to it.)
create or replace function queues.get_task_status(_task_id bigint)
returns table (task_id bigint, status queues.task_status, attempt integer, max_attempts integer,
               result jsonb, last_error text, enqueued_at timestamptz, run_at timestamptz,
               finished_at timestamptz)
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _task_id is null then
        raise exception 'get_task_status: _task_id must not be NULL' using errcode = 'invalid_parameter_value';
    end if;
    return query select * from queues.get_task_statuses(array[_task_id]);
end $$;
revoke all on function queues.get_task_status(bigint) from public;
comment on function queues.get_task_status(bigint) is
    'The status, attempts, result, last error and times of one task the calling role may see (queues.get_task_statuses); no row for a task it may not see, as for one that does not exist.';
