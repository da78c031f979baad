-- Completes a channel task whose provider call failed but must not run again (docs/providers.md,
-- "When a provider fails"): completed under its lease, with call_failure and last_error.
create or replace function queues.complete_failed_call(_task_id bigint, _lease_id bigint, _reason text, _error_message text)
returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _msg text := left(coalesce(nullif(_error_message, ''), 'unknown error'), 8192);
begin
    update queues.task t
    set status = 'completed', completed_at = clock_timestamp(), lease_expires_at = null,
        last_error = _msg, call_failure = coalesce(nullif(_reason, ''), 'call_failed')
    where t.task_id = _task_id and t.lease_id = _lease_id and t.lease_expires_at is not null;  -- i.e. running
    if found then
        -- Its waiting children count it as completed, in this transaction (docs/workflows.md).
        if exists (select from queues.task_edge e where e.parent_id = _task_id) then
            perform internal.resolve_parents(array[_task_id], array['completed'::queues.task_status]);
        end if;
        return true;
    end if;
    -- Not running under the lease: complete_task says whether it is a repeat, or records the refusal.
    return queues.complete_task(_task_id, _lease_id);
end $$;
revoke all on function queues.complete_failed_call(bigint, bigint, text, text) from public;
grant execute on function queues.complete_failed_call(bigint, bigint, text, text) to worker_service_user;
