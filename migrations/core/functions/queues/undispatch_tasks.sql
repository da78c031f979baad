-- Clears the dispatch mark of tasks whose ids could not be sent, so they are dispatched again at
-- the next pass: a failed send leaves the task eligible. Tasks no longer pending are left alone.
-- Returns how many marks were cleared. (If this call fails too, the reclaimer clears the marks
-- after its window.)
create or replace function queues.undispatch_tasks(_task_ids bigint[]) returns integer
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _n integer;
begin
    update queues.task t
    set dispatched_at = null
    where t.task_id = any (_task_ids) and t.status = 'pending' and t.dispatched_at is not null;
    get diagnostics _n = row_count;
    return _n;
end $$;
revoke all on function queues.undispatch_tasks(bigint[]) from public;
grant execute on function queues.undispatch_tasks(bigint[]) to worker_service_user;
