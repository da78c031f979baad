-- The parents of task _task_id (its after_ids, docs/workflows.md "Results"), each with its status
-- and its result as committed with its completion (NULL when it returned none or did not
-- complete; status and result NULL for a parent deleted since). In parent id order; no rows for a
-- task without parents. 22023 for a NULL id, P0002 for a task that does not exist. Read-only;
-- granted to the worker role (a db_function child calls it with queues.current_task_id()).
create or replace function queues.parent_results(_task_id bigint)
returns table (parent_id bigint, status queues.task_status, result jsonb)
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
declare
    _after bigint[];
begin
    if _task_id is null then
        raise exception 'parent_results: _task_id must not be NULL (in a db_function task, pass queues.current_task_id())'
            using errcode = 'invalid_parameter_value';
    end if;
    select t.after_ids into _after from queues.task t where t.task_id = _task_id;
    if not found then
        raise exception 'parent_results: task % does not exist', _task_id using errcode = 'no_data_found';
    end if;
    return query
    select a.id, p.status, p.result
    from unnest(_after) as a(id)
    left join queues.task p on p.task_id = a.id
    order by a.id;
end $$;
revoke all on function queues.parent_results(bigint) from public;
grant execute on function queues.parent_results(bigint) to worker_service_user;
comment on function queues.parent_results(bigint) is 'A task''s parents with their status and result (docs/workflows.md).';
