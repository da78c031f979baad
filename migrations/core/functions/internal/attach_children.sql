-- Writes what waiting for parents needs beside the rows of the tasks _task_ids, just inserted
-- with the status, after_ids and workflow_id that internal.parents_of gave (the other arguments
-- are its output): a task cancelled by a failed parent gets its 'cancelled' event naming that
-- parent; a waiting task an edge per open parent and its stripe counters (docs/workflows.md,
-- "How the release works"); every task its row in its workflow's tasks (queues.workflow_task).
-- Set-based: one statement of each kind for all the tasks.
create or replace function internal.attach_children(
    _task_ids bigint[], _open bigint[], _workflow bigint, _status queues.task_status, _stripes integer,
    _failed_parent bigint, _failed_status queues.task_status)
returns void
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _k integer := cardinality(_open);
begin
    insert into queues.workflow_task (workflow_id, task_id)
    select _workflow, c.id from unnest(_task_ids) as c(id);
    if _status = 'cancelled' then
        insert into queues.task_event (task_id, event, from_status, to_status, worker_id, attempt, detail)
        select c.id, 'cancelled', 'pending', 'cancelled', session_user, 0,
               format('parent task %s ended %s', _failed_parent, _failed_status)
        from unnest(_task_ids) as c(id)
        order by c.id;
        return;
    end if;
    if _status <> 'waiting' then
        return;
    end if;
    if _k > 1 then
        insert into queues.task_wait_stripe (child_id, stripe, pending)
        select c.id, (o.n - 1) * _stripes / _k, count(*)
        from unnest(_task_ids) as c(id)
        cross join unnest(_open) with ordinality as o(id, n)
        group by 1, 2;
    end if;
    insert into queues.task_edge (parent_id, child_id, stripe)
    select o.id, c.id, case when _k = 1 then -1 else (o.n - 1) * _stripes / _k end
    from unnest(_task_ids) as c(id)
    cross join unnest(_open) with ordinality as o(id, n);
end $$;
revoke all on function internal.attach_children(bigint[], bigint[], bigint, queues.task_status, integer, bigint, queues.task_status) from public;
