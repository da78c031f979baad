-- An operator's retry of up to 1,000 tasks by id, recording who did it (docs/sql.md,
-- "Operators' actions"): one row per task with what became of it.
create or replace function queues.retry_tasks(_task_ids bigint[], _actor text default null)
returns table (task_id bigint, outcome text, status queues.task_status)
language sql security definer set search_path = pg_catalog, pg_temp as $$
    select * from internal.task_action_by_id('retry_tasks', 'retry', _task_ids, _actor, null)
$$;
revoke all on function queues.retry_tasks(bigint[], text) from public;
comment on function queues.retry_tasks(bigint[], text) is
    'Puts up to 1,000 dead, failed or cancelled tasks back to pending, due now, attempts reset (a pending one is made due now), recording _actor (default: the database role) in each task''s retried event; one row per task: done, not_found, wrong_state, busy (its row is locked: try again) or conflict (a pending task holds its debounce key). Never waits for a lock.';
