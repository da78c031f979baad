-- Registers a waiter for task _task_id and returns its status, or NULL when there is no such task
-- (nothing is registered then). Call it after LISTEN taskorch_task_done: a task that reaches a
-- terminal status after this returns is announced on that channel with its id. The status is
-- read under a share lock, so a transition that is being committed is waited for and seen: no
-- terminal transition falls between the answer and the notification.
create or replace function queues.watch_task(_task_id bigint) returns text
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _s queues.task_status;
begin
    select t.status into _s from queues.task t where t.task_id = _task_id for share;
    if not found then
        return null;
    end if;
    if _s not in ('completed', 'failed', 'dead', 'cancelled') then
        insert into queues.task_waiter (task_id) values (_task_id)
        on conflict (task_id) do update set watched_at = excluded.watched_at;
    end if;
    return _s::text;
end $$;
revoke all on function queues.watch_task(bigint) from public;
