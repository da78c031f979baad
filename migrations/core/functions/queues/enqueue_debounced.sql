-- Enqueues a debounced task as its caller: a permit, then queues.insert_debounced_task.
create or replace function queues.enqueue_debounced(
    _task_type text,
    _payload jsonb,
    _debounce_key text,
    _delay interval,
    _priority integer default 0,
    _max_attempts integer default null)
returns table (task_id bigint, debounced boolean)
language plpgsql security invoker set search_path = pg_catalog, pg_temp as $$
begin
    if _task_type in ('db_function', 'email', 'sms', 'file_delete') then
        perform queues.permit_task_functions(array[_task_type], array[_payload]);
    end if;
    return query select * from queues.insert_debounced_task(_task_type, _payload, _debounce_key, _delay, _priority, _max_attempts);
end $$;
revoke all on function queues.enqueue_debounced(text, jsonb, text, interval, integer, integer) from public;
