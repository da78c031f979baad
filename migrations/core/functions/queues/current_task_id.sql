-- The id of the task whose lease-locked transaction this is (set by queues.lock_lease, which the
-- worker calls first in a db_function's or a transactional handler's transaction), or NULL
-- outside one. A db_function child reads its parents' results with
-- queues.parent_results(queues.current_task_id()) (docs/workflows.md "Results").
create or replace function queues.current_task_id() returns bigint
language sql stable set search_path = pg_catalog, pg_temp as $$
    select nullif(current_setting('taskorch.task_id', true), '')::bigint
$$;
revoke all on function queues.current_task_id() from public;
grant execute on function queues.current_task_id() to worker_service_user;
