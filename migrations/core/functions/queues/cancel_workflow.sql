-- An operator's cancel of a whole workflow (docs/workflows.md, "Cancelling a workflow"): every
-- task of it that is waiting, pending, running, failed or dead, recording who did it and why.
-- matched: the workflow's tasks in those statuses; done: cancelled by this call; skipped: matched
-- but their row was locked by another transaction (a completion or lease renewal in flight):
-- call again, it acts on what is still not ended. A workflow whose every task has ended gives
-- 0, 0, 0; an id that is no workflow's raises P0002. A task whose row is locked is skipped, not
-- waited for.
create or replace function queues.cancel_workflow(_workflow_id bigint, _actor text default null, _reason text default null)
returns table (matched integer, done integer, skipped integer)
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _statuses queues.task_status[] := internal.task_action_statuses('cancel');
    _ids bigint[];
    _n integer;
begin
    if _workflow_id is null or _workflow_id <= 0 then
        raise exception 'cancel_workflow: _workflow_id must be a workflow''s id (its first task''s), got %',
            coalesce(_workflow_id::text, 'NULL') using errcode = 'invalid_parameter_value';
    end if;
    _actor := internal.operator_actor('cancel_workflow', _actor);
    -- A workflow's id is its first task's; that task's own workflow_id stays NULL, and a task
    -- with neither parents nor children is in no workflow.
    if not exists (select from queues.workflow_task w where w.workflow_id = _workflow_id) then
        raise exception 'cancel_workflow: workflow % does not exist', _workflow_id using errcode = 'no_data_found';
    end if;
    _ids := array(select t.task_id from queues.task t
                  where t.task_id in (select w.task_id from queues.workflow_task w where w.workflow_id = _workflow_id
                                      union all select _workflow_id)
                    and t.status = any (_statuses)
                  order by t.task_id);
    if cardinality(_ids) = 0 then
        return query select 0, 0, 0;
        return;
    end if;
    select count(*) into _n
    from internal.apply_task_action('cancel', _ids, _statuses, _actor,
                                    coalesce(nullif(_reason, ''), format('workflow %s cancelled', _workflow_id)));
    return query select cardinality(_ids), _n, cardinality(_ids) - _n;
end $$;
revoke all on function queues.cancel_workflow(bigint, text, text) from public;
comment on function queues.cancel_workflow(bigint, text, text) is
    'Cancels every waiting, pending, running, failed or dead task of workflow _workflow_id (a running task''s worker is told at commit), recording _actor and _reason (default: "workflow N cancelled") in each cancelled event; returns matched, done and skipped (row locked by another transaction: call again). P0002 for an id that is no workflow''s. Skips, never waits for, a task whose row is locked.';
