-- A channel task (email, sms, file_delete) owned by a supervisor is completed even when its call
-- failed (the provider answered an error, its before handler failed, no provider is configured):
-- the error handler records the failure fact and the supervisor retries with a new attempt. The
-- task now says so instead of looking like a plain success: call_failure names what failed,
-- last_error holds the error, and the task's 'completed' event carries the error as its detail,
-- so that listings show "completed · provider failed" and the dashboard counts the attempt as a
-- failed one. docs/providers.md, "When a provider fails", says the rest.
--
-- Only that path writes the column: an ordinary completion (queues.complete_tasks) is unchanged
-- and leaves it NULL.

alter table queues.task add column call_failure text;
comment on column queues.task.call_failure is
    'A channel task completed although its call failed: what failed (provider_error, no_provider, before_handler_error, before_handler_refused); last_error holds the error. NULL for every other task.';

-- Completes task _task_id under lease _lease_id as queues.complete_task does, recording that its
-- channel call failed: call_failure = _reason, last_error = _error_message, and the 'completed'
-- event's detail = _error_message. Returns whether the task is completed under the lease (a
-- repeat counts); a refusal is recorded in queues.error as complete_task records it.
create function queues.complete_failed_call(_task_id bigint, _lease_id bigint, _reason text, _error_message text)
returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _msg text := left(coalesce(nullif(_error_message, ''), 'unknown error'), 8192);
begin
    with done as (
        update queues.task t
        set status = 'completed', completed_at = now(), lease_expires_at = null,
            last_error = _msg, call_failure = coalesce(nullif(_reason, ''), 'call_failed')
        where t.task_id = _task_id and t.lease_id = _lease_id and t.lease_expires_at is not null  -- i.e. running
        returning t.task_id, t.lease_id, t.worker_id, t.attempt
    )
    insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
    select d.task_id, 'completed', 'running', 'completed', d.lease_id, d.worker_id, d.attempt, _msg
    from done d;
    if found then
        return true;
    end if;
    -- Not running under the lease: complete_task says whether it is a repeat, or records the refusal.
    return queues.complete_task(_task_id, _lease_id);
end $$;

revoke all on function queues.complete_failed_call(bigint, bigint, text, text) from public;
grant execute on function queues.complete_failed_call(bigint, bigint, text, text) to worker_service_user;
