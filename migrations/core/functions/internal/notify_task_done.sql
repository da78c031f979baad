-- After every update of queues.task's status: when some waited-for task is now terminal, forget
-- its waiter row and NOTIFY taskorch_task_done with the ids (comma-separated, 300 per
-- notification). With no waiters this is one look at an empty table. No transition table: it
-- would copy every updated row of every claim and completion, waiters or not.
create or replace function internal.notify_task_done() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _chunks text[];
    _ids text;
begin
    if not exists (select from queues.task_waiter) then
        return null;
    end if;
    -- Driven by the waiter rows, one primary-key lookup each (a scalar subquery is never turned
    -- into a join): a join let the planner hash the whole task table, 82 ms for a statement
    -- completing 500 tasks with 1,000 waiters; this costs about 2 ms more than no trigger
    -- (docs/benchmarks.md, "Results and waiting").
    with gone as (
        delete from queues.task_waiter w
        where (select t.status from queues.task t where t.task_id = w.task_id) in ('completed', 'failed', 'dead', 'cancelled')
        returning w.task_id
    ), numbered as (
        select g.task_id, (row_number() over (order by g.task_id) - 1) / 300 as chunk from gone g
    )
    select array_agg(s.ids) into _chunks
    from (select string_agg(n.task_id::text, ',' order by n.task_id) as ids from numbered n group by n.chunk) s;
    foreach _ids in array coalesce(_chunks, '{}') loop
        perform pg_notify('taskorch_task_done', _ids);
    end loop;
    return null;
end $$;
revoke all on function internal.notify_task_done() from public;
