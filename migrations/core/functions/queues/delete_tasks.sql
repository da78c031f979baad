-- An operator's delete of up to 1,000 finished tasks by id, recording who did it (docs/sql.md,
-- "Operators' actions"): one row per task with what became of it.
create or replace function queues.delete_tasks(_task_ids bigint[], _actor text default null)
returns table (task_id bigint, outcome text, status queues.task_status)
language sql security definer set search_path = pg_catalog, pg_temp as $$
    select * from internal.task_action_by_id('delete_tasks', 'delete', _task_ids, _actor, null)
$$;
revoke all on function queues.delete_tasks(bigint[], text) from public;
comment on function queues.delete_tasks(bigint[], text) is
    'Deletes up to 1,000 finished (completed, failed, dead, cancelled) tasks with their error rows, never a pending or running one (wrong_state: cancel it first); a deleted event with _actor stays in the history until its day is dropped. One row per task: done, not_found, wrong_state or busy. Never waits for a lock.';
