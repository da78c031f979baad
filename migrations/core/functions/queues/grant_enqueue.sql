-- Grants. Everything an enqueueing role needs, in one call, for new roles (docs/security.md).
create or replace function queues.grant_enqueue(_role regrole) returns void
language plpgsql security invoker set search_path = pg_catalog, pg_temp as $$
begin
    if _role is null then
        raise exception 'grant_enqueue: role must not be null' using errcode = 'invalid_parameter_value';
    end if;
    execute format('grant usage on schema queues to %s', _role);
    execute format('grant execute on function
        queues.enqueue(text, jsonb, timestamptz, integer, text, integer, bigint[], text),
        queues.enqueue_with_result(text, jsonb, timestamptz, integer, text, integer, bigint[], text),
        queues.enqueue_many(text[], jsonb[], timestamptz[], integer[], text[], integer[], bigint[], text),
        queues.enqueue_many_with_result(text[], jsonb[], timestamptz[], integer[], text[], integer[], bigint[], text),
        queues.enqueue_debounced(text, jsonb, text, interval, integer, integer),
        queues.insert_task(text, jsonb, timestamptz, integer, text, integer, bigint[], text),
        queues.insert_tasks(text[], jsonb[], timestamptz[], integer[], text[], integer[], bigint[], text),
        queues.insert_debounced_task(text, jsonb, text, interval, integer, integer),
        queues.permit_task_functions(text[], jsonb[]),
        queues.get_task_status(bigint),
        queues.get_task_statuses(bigint[]) to %s', _role);
    execute format('grant insert on table queues.enqueue_permit to %s', _role);
end $$;
revoke all on function queues.grant_enqueue(regrole) from public;
comment on function queues.grant_enqueue(regrole) is 'Grants a role what enqueueing takes: the enqueue functions, the insert functions they call, the permit they ask for, and queues.get_task_status and get_task_statuses to read its own tasks. Run as the schema owner.';
