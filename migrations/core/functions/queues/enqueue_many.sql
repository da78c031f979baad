-- Enqueues many tasks in one statement as their caller: a permit, then queues.insert_tasks.
-- Returns the ids in input order.
create or replace function queues.enqueue_many(
    _task_types text[],
    _payloads jsonb[],
    _scheduled_ats timestamptz[] default null,
    _priorities integer[] default null,
    _idempotency_keys text[] default null,
    _max_attempts integer[] default null,
    _after bigint[] default null,
    _on_parent_failure text default 'cancel')
returns bigint[]
language plpgsql security invoker set search_path = pg_catalog, pg_temp as $$
begin
    if _task_types && array['db_function', 'email', 'sms', 'file_delete'] then
        perform queues.permit_task_functions(_task_types, _payloads);
    end if;
    return (select coalesce(array_agg(r.task_id order by r.ord), '{}')
            from queues.insert_tasks(_task_types, _payloads, _scheduled_ats, _priorities,
                                     _idempotency_keys, _max_attempts, _after, _on_parent_failure) with ordinality as r(task_id, duplicate, ord));
end $$;
revoke all on function queues.enqueue_many(text[], jsonb[], timestamp with time zone[], integer[], text[], integer[], bigint[], text) from public;
