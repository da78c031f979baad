-- The enqueue functions, as their callers: a permit for what the tasks name, then the insert.
create or replace function queues.enqueue_with_result(
    _task_type text,
    _payload jsonb,
    _scheduled_at timestamptz default now(),
    _priority integer default 0,
    _idempotency_key text default null,
    _max_attempts integer default null,
    _after bigint[] default null,
    _on_parent_failure text default 'cancel')
returns table (task_id bigint, duplicate boolean)
language plpgsql security invoker set search_path = pg_catalog, pg_temp as $$
begin
    if _task_type in ('db_function', 'email', 'sms', 'file_delete') then
        perform queues.permit_task_functions(array[_task_type], array[_payload]);
    end if;
    return query select * from queues.insert_task(_task_type, _payload, _scheduled_at, _priority, _idempotency_key, _max_attempts, _after, _on_parent_failure);
end $$;
revoke all on function queues.enqueue_with_result(text, jsonb, timestamp with time zone, integer, text, integer, bigint[], text) from public;
