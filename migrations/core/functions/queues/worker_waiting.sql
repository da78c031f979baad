-- Called by a worker about to wait for NOTIFY taskorch_task, before its last claim: bumps
-- internal.task_waiter_seq so that the next enqueue notifies, and tells whether an enqueue that
-- began before the call is still in flight (docs/worker.md, "The loop").
--
-- The race: an enqueue that looked before the worker said it waits, and commits after the
-- worker's last claim read the table, would not wake it. Every enqueue holds the shared advisory
-- lock internal.enqueue_lock_key() from its inserting statement to the end of its transaction;
-- this function tries the same lock exclusively (at once, without queueing) after its bump: when
-- it gets it, no such enqueue is in flight, and the claim the worker sends next sees every task
-- not notified about; when it does not, the worker polls every PollInterval without backing off
-- until a try succeeds, so such a task starts within PollInterval of its commit.
create or replace function queues.worker_waiting() returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _clear boolean := false;
begin
    perform nextval('internal.task_waiter_seq');
    -- The lock is taken in a block that always fails, so that it is released at once: a lock
    -- taken after a savepoint is released when the savepoint is rolled back.
    begin
        _clear := pg_try_advisory_xact_lock(internal.enqueue_lock_key());
        raise sqlstate 'TOW01';
    exception when sqlstate 'TOW01' then
        null;
    end;
    return _clear;
end $$;
comment on function queues.worker_waiting() is
    'Called by a worker about to wait for NOTIFY taskorch_task, before its last claim: the next enqueue notifies. False when an enqueue that began before the call is still in flight (its task may commit after the claim without a notification: poll). docs/worker.md, "The loop".';
revoke all on function queues.worker_waiting() from public;
grant execute on function queues.worker_waiting() to worker_service_user;
