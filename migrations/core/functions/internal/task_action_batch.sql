-- By filter: one batch of at most _batch matching tasks after _after_task_id. matched: the tasks
-- the batch looked at (fewer than _batch: the filter has no more after them); done: acted on;
-- skipped: matched but not acted on (another transaction held the row, or it changed meanwhile);
-- last_task_id: the cursor for the next call (NULL when nothing matched).
create or replace function internal.task_action_batch(
    _label text, _action text, _statuses queues.task_status[], _task_types text[], _idempotency_key text,
    _enqueued_since timestamptz, _enqueued_until timestamptz, _finished_since timestamptz, _finished_until timestamptz,
    _after_task_id bigint, _batch integer, _actor text, _reason text)
returns table (matched integer, done integer, skipped integer, last_task_id bigint)
language plpgsql set search_path = pg_catalog, pg_temp as $$
declare
    _st queues.task_status[];
    _ids bigint[];
    _n integer;
begin
    _st := internal.check_task_filter(_label, _action, _statuses, _task_types, _idempotency_key,
                                      _enqueued_since, _enqueued_until, _finished_since, _finished_until);
    if _after_task_id is null or _after_task_id < 0 then
        raise exception '%: _after_task_id must be 0 (from the start) or a task id, got %', _label, coalesce(_after_task_id::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _batch is null or _batch not between 1 and 1000 then
        raise exception '%: _batch must be between 1 and 1000, got %', _label, coalesce(_batch::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    _actor := internal.operator_actor(_label, _actor);
    _ids := array(select m from internal.matching_tasks(_st, _task_types, _idempotency_key, _enqueued_since, _enqueued_until,
                                                         _finished_since, _finished_until, _after_task_id, _batch) m);
    if cardinality(_ids) = 0 then
        return query select 0, 0, 0, null::bigint;
        return;
    end if;
    select count(*) into _n from internal.apply_task_action(_action, _ids, _st, _actor, _reason);
    return query select cardinality(_ids), _n, cardinality(_ids) - _n, _ids[cardinality(_ids)];
end $$;
revoke all on function internal.task_action_batch(text, text, queues.task_status[], text[], text, timestamptz, timestamptz, timestamptz, timestamptz, bigint, integer, text, text) from public;
