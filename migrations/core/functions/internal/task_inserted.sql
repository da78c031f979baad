-- Trigger of queues.task (task_inserted: after insert, per statement, the inserted rows as
-- inserted_tasks). Two things every statement that inserts tasks needs, in one call (each
-- trigger call, with its change of search_path, costs a one-row enqueue a few µs; they were two
-- triggers until core/0108):
-- 1. Limits: gives the inserted tasks their limit and bucket when a limit governs them; one
--    EXISTS on an empty table when no limit is set (docs/limits.md). Every enqueue and insert
--    function writes a governed task's limit and bucket with the row (one write, not an insert
--    and then an update): this covers rows inserted by hand and skips rows that have them.
-- 2. Wake-up: takes the enqueues' advisory lock (internal.enqueue_lock_key(), shared, until the
--    transaction ends) and sends NOTIFY taskorch_task only when a worker waits that no enqueue
--    has answered yet (queues.worker_waiting bumped internal.task_waiter_seq past
--    internal.task_woken_seq), recording the answer; the notifications are still spaced by
--    queues.notify_coalesce_ms() (docs/design.md, "Enqueue").
create or replace function internal.task_inserted() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _waiting bigint;
    _window integer;
    _now bigint;
    _until bigint;
begin
    if exists (select from queues.task_limit) then
        update queues.task t
        set limit_name = l.task_type, limit_key = internal.limit_key(l.key_field, t.payload)
        from inserted_tasks n
        cross join lateral (select * from internal.limit_of(n.task_type, n.payload)) l
        where n.limit_name is null and t.task_id = n.task_id and l.task_type is not null;
    end if;

    -- Held until this transaction ends: a worker going idle sees this enqueue in flight.
    perform pg_advisory_xact_lock_shared(internal.enqueue_lock_key());
    _waiting := pg_sequence_last_value('internal.task_waiter_seq');
    if _waiting is null or _waiting <= coalesce(pg_sequence_last_value('internal.task_woken_seq'), 0) then
        return null; -- no worker waits, or an enqueue since it began to wait has woken it
    end if;
    _window := queues.notify_coalesce_ms();
    if _window > 0 then
        _now := (extract(epoch from clock_timestamp()) * 1000)::bigint;
        _until := (select last_value from internal.task_notify_clock);
        -- A stamp further ahead than one window means the clock went back: notify, and restart.
        if _now < _until and _until - _now <= _window then
            return null;
        end if;
        perform setval('internal.task_notify_clock', _now + _window);
    end if;
    perform setval('internal.task_woken_seq', _waiting);
    perform pg_notify('taskorch_task', '');
    return null;
end $$;
revoke all on function internal.task_inserted() from public;
