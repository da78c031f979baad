-- queues.enqueue_many that also says which tasks were duplicates (what the Go client's EnqueueMany
-- calls).
create or replace function queues.enqueue_many_with_result(
    _task_types text[],
    _payloads jsonb[],
    _scheduled_ats timestamptz[] default null,
    _priorities integer[] default null,
    _idempotency_keys text[] default null,
    _max_attempts integer[] default null,
    _after bigint[] default null,
    _on_parent_failure text default 'cancel')
returns table (task_id bigint, duplicate boolean)
language plpgsql security invoker set search_path = pg_catalog, pg_temp as $$
begin
    if _task_types && array['db_function', 'email', 'sms', 'file_delete'] then
        perform queues.permit_task_functions(_task_types, _payloads);
    end if;
    return query select * from queues.insert_tasks(_task_types, _payloads, _scheduled_ats, _priorities,
                                                   _idempotency_keys, _max_attempts, _after, _on_parent_failure);
end $$;
revoke all on function queues.enqueue_many_with_result(text[], jsonb[], timestamp with time zone[], integer[], text[], integer[], bigint[], text) from public;
