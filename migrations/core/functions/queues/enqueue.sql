-- Enqueues a task as its caller (SECURITY INVOKER): a permit for the functions it names, then
-- queues.insert_task. Returns the task's id (an existing one's for a known idempotency key).
create or replace function queues.enqueue(
    _task_type text,
    _payload jsonb,
    _scheduled_at timestamptz default now(),
    _priority integer default 0,
    _idempotency_key text default null,
    _max_attempts integer default null,
    _after bigint[] default null,
    _on_parent_failure text default 'cancel')
returns bigint
language plpgsql security invoker set search_path = pg_catalog, pg_temp as $$
declare
    _id bigint;
begin
    if _task_type in ('db_function', 'email', 'sms', 'file_delete') then
        perform queues.permit_task_functions(array[_task_type], array[_payload]);
    end if;
    select r.task_id into _id
    from queues.insert_task(_task_type, _payload, _scheduled_at, _priority, _idempotency_key, _max_attempts, _after, _on_parent_failure) r;
    return _id;
end $$;
revoke all on function queues.enqueue(text, jsonb, timestamp with time zone, integer, text, integer, bigint[], text) from public;
