-- Makes the task _task_id, already inserted as pending (by queues.insert_task or
-- queues.insert_tasks with an idempotency key, which learn only from the insert whether the task
-- is new), wait for the parents _after (docs/workflows.md): internal.parents_of checks and locks
-- them and says what the task becomes; its row is updated to that (status, after_ids,
-- on_parent_failure, waiting_stripes, workflow_id) and internal.attach_children writes its
-- edges, counters, event and workflow row. A task enqueued without a key is written once, with
-- all of this in its insert. Returns its status.
create or replace function internal.attach_parents(_task_id bigint, _after bigint[], _on_parent_failure text)
returns queues.task_status
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _p record;
begin
    select * into _p from internal.parents_of(_after, _on_parent_failure);
    update queues.task t
    set status = _p.status,
        cancelled_at = case when _p.status = 'cancelled' then clock_timestamp() end,
        after_ids = _p.ids, on_parent_failure = _on_parent_failure, waiting_stripes = _p.stripes,
        workflow_id = _p.workflow
    where t.task_id = _task_id;
    perform internal.attach_children(array[_task_id], _p.open, _p.workflow, _p.status, _p.stripes,
                                     _p.failed_parent, _p.failed_status);
    return _p.status;
end $$;
revoke all on function internal.attach_parents(bigint, bigint[], text) from public;
