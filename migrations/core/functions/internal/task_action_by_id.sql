-- By id: what became of each task named, in id order. outcome: done; unchanged (cancelling a
-- cancelled task); not_found; wrong_state (its status forbids the action: status says which);
-- busy (another transaction holds its row: try again); conflict (retry: a pending task holds its
-- debounce key).
create or replace function internal.task_action_by_id(_label text, _action text, _task_ids bigint[], _actor text, _reason text)
returns table (task_id bigint, outcome text, status queues.task_status)
language plpgsql set search_path = pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    _ids bigint[] := internal.check_task_ids(_label, _task_ids);
    _statuses queues.task_status[] := internal.task_action_statuses(_action);
    _done bigint[];
begin
    _actor := internal.operator_actor(_label, _actor);
    if _action = 'retry' then
        _statuses := _statuses || 'pending'::queues.task_status; -- made due now, as queues.retry_task does
    end if;
    _done := array(select a.task_id from internal.apply_task_action(_action, _ids, _statuses, _actor, _reason) a);
    return query
    select i.id,
           case when i.id = any (_done) then 'done'
                when t.task_id is null then 'not_found'
                when _action = 'cancel' and t.status = 'cancelled' then 'unchanged'
                when t.status <> all (_statuses) then 'wrong_state'
                when _action = 'retry' and t.debounce_key is not null and exists (
                    select from queues.task p
                    where p.task_type = t.task_type and p.key_scope = t.key_scope and p.debounce_key = t.debounce_key and p.status = 'pending'
                      and p.task_id <> t.task_id) then 'conflict'
                else 'busy' end,
           t.status
    from unnest(_ids) as i(id)
    left join queues.task t on t.task_id = i.id
    order by i.id;
end $$;
revoke all on function internal.task_action_by_id(text, text, bigint[], text, text) from public;
