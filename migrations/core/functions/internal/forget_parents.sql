-- Trigger of queues.task (task_parents_forget: after delete, per row, of a task that named
-- parents): deletes its edges and counters, which a child cancelled while it waited keeps until
-- then, and its row in its workflow's tasks (docs/workflows.md). Only finished tasks are deleted, so no parent's completion waits for
-- this task's row: it locks the edges after the row without a deadlock.
create or replace function internal.forget_parents() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    delete from queues.task_edge e where e.child_id = old.task_id;
    delete from queues.task_wait_stripe w where w.child_id = old.task_id;
    delete from queues.workflow_task w where w.workflow_id = old.workflow_id and w.task_id = old.task_id;
    return null;
end $$;
revoke all on function internal.forget_parents() from public;
