-- The second half of cancelling a durable Go workflow (docs/workflows.md, "Cancelling a durable
-- workflow"): cancels the tasks task _task_id spawned (its spawn checkpoints in
-- queues.workflow_step), and those they spawned in turn, that are waiting, pending, running,
-- failed or dead, recording _actor and _reason (default "spawned by workflow task N, cancelled").
-- matched: those tasks; done: cancelled by this call; skipped: matched but their row was locked
-- by another transaction (a completion, claim or lease renewal in flight): call again, it acts on
-- what has still not ended.
--
-- It never locks task _task_id's row, and locks the spawned rows with SKIP LOCKED, never waiting:
-- run after the workflow's cancel has committed, it cannot deadlock with a spawned task's end
-- releasing the workflow (which locks the spawned row, then the workflow's), nor with the
-- workflow's Await (the workflow's row, then the spawned ones). Refused with 22023: a NULL or
-- non-positive id; P0002: an id no task has. A task that spawned nothing gives 0, 0, 0.
create or replace function queues.cancel_spawned_tasks(_task_id bigint, _actor text default null, _reason text default null)
returns table (matched integer, done integer, skipped integer)
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _statuses queues.task_status[] := internal.task_action_statuses('cancel');
    _ids bigint[];
    _n integer;
begin
    if _task_id is null or _task_id <= 0 then
        raise exception 'cancel_spawned_tasks: _task_id must be a task''s id, got %', coalesce(_task_id::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    _actor := internal.operator_actor('cancel_spawned_tasks', _actor);
    if not exists (select from queues.task t where t.task_id = _task_id) then
        raise exception 'cancel_spawned_tasks: task % does not exist', _task_id using errcode = 'no_data_found';
    end if;
    with recursive spawned(id) as (
        select (s.result ->> 'task_id')::bigint
        from queues.workflow_step s
        where s.task_id = _task_id and s.kind = 'spawn'
        union
        select (s.result ->> 'task_id')::bigint
        from spawned p
        join queues.workflow_step s on s.task_id = p.id and s.kind = 'spawn'
    )
    select coalesce(array_agg(t.task_id order by t.task_id), '{}') into _ids
    from queues.task t
    where t.task_id in (select id from spawned) and t.status = any (_statuses);
    if cardinality(_ids) = 0 then
        return query select 0, 0, 0;
        return;
    end if;
    select count(*) into _n
    from internal.apply_task_action('cancel', _ids, _statuses, _actor,
                                    coalesce(nullif(_reason, ''), format('spawned by workflow task %s, cancelled', _task_id)));
    return query select cardinality(_ids), _n, cardinality(_ids) - _n;
end $$;
revoke all on function queues.cancel_spawned_tasks(bigint, text, text) from public;
comment on function queues.cancel_spawned_tasks(bigint, text, text) is
    'Cancels the waiting, pending, running, failed or dead tasks durable workflow task _task_id spawned, and those they spawned (a running one''s worker is told at commit), recording _actor and _reason; returns matched, done and skipped (row locked by another transaction: call again). Never locks the workflow''s row nor waits for a spawned one''s. P0002 for an unknown id.';
