-- An operator's cancel of up to 1,000 tasks by id, recording who did it and why (docs/sql.md,
-- "Operators' actions"): one row per task with what became of it.
create or replace function queues.cancel_tasks(_task_ids bigint[], _actor text default null, _reason text default null)
returns table (task_id bigint, outcome text, status queues.task_status)
language sql security definer set search_path = pg_catalog, pg_temp as $$
    select * from internal.task_action_by_id('cancel_tasks', 'cancel', _task_ids, _actor, _reason)
$$;
revoke all on function queues.cancel_tasks(bigint[], text, text) from public;
comment on function queues.cancel_tasks(bigint[], text, text) is
    'Cancels up to 1,000 pending, running, failed or dead tasks (a running task''s worker is told at commit), recording _actor and _reason in each task''s cancelled event; one row per task: done, unchanged (already cancelled), not_found, wrong_state (completed) or busy (its row is locked: try again). Never waits for a lock.';
