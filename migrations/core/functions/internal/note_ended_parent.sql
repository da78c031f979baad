-- Trigger of queues.task (task_parent_ended: after update of status, per row, when a task ends
-- failed, dead or cancelled; completions call internal.resolve_parents themselves): notes the task for internal.resolve_ended_parents when
-- it has waiting children, in the transaction-local setting taskorch.ended_parents. Does nothing
-- inside internal.resolve_parents, which counts the ends it causes itself. A waiting task that is
-- cancelled keeps its counters, and its edges until their parents end (touching them here would
-- lock them after the task's row, the reverse of a parent's completion): they go with its row
-- (internal.forget_parents).
create or replace function internal.note_ended_parent() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    if current_setting('taskorch.resolving_parents', true) = 'on' then
        return null;
    end if;
    if exists (select from queues.task_edge e where e.parent_id = new.task_id) then
        perform set_config('taskorch.ended_parents',
            coalesce(current_setting('taskorch.ended_parents', true), '') || new.task_id::text || ':' || new.status::text || ',',
            true);
    end if;
    return null;
end $$;
revoke all on function internal.note_ended_parent() from public;
