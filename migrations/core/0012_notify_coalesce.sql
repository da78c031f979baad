-- Coalesced wake-ups, for databases that enqueue from many sessions at once.
--
-- A transaction that sends NOTIFY takes a cluster-wide lock at commit and holds it until its
-- commit record is flushed, so transactions that notify commit one at a time. With one NOTIFY
-- per enqueueing statement, concurrent single enqueues (an application's own transactions
-- calling queues.enqueue) are serialised by it: with pgbench, 16 clients, one queues.enqueue per
-- transaction, about half as many enqueues per second commit with the notification as without
-- (docs/benchmarks.md, "Wake-ups").
--
-- queues.notify_coalesce_ms() says how long after a notification an enqueue may skip its own:
-- 0, the default, notifies on every enqueueing statement. Like queues.retry_delay, an operator
-- changes it by replacing the function:
--     create or replace function queues.notify_coalesce_ms() returns integer
--     language sql stable as $$ select 10 $$;
-- The price is latency: a task whose enqueue skipped its notification waits for the next
-- notification or for the worker's next claim, which comes at once while the worker is busy and
-- within PollInterval (100 ms by default) after it goes idle. Nothing is lost either way:
-- workers poll too.
create function queues.notify_coalesce_ms() returns integer
language sql stable parallel safe as $$ select 0 $$;

-- The clock is a sequence holding the time (ms since the epoch) until which enqueues skip their
-- notification: setval is not transactional, so every session sees the stamp at once, and it
-- takes no row lock. Two sessions may both notify in one window; that is harmless.
create sequence internal.task_notify_clock as bigint minvalue 0 start with 0;

create or replace function internal.notify_task_inserted() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _window integer := queues.notify_coalesce_ms();
    _now bigint;
    _until bigint;
begin
    if _window is null or _window <= 0 then
        perform pg_notify('taskorch_task', '');
        return null;
    end if;
    _now := (extract(epoch from clock_timestamp()) * 1000)::bigint;
    _until := (select last_value from internal.task_notify_clock);
    -- A stamp further ahead than one window means the clock went back: notify, and restart.
    if _now >= _until or _until - _now > _window then
        perform setval('internal.task_notify_clock', _now + _window);
        perform pg_notify('taskorch_task', '');
    end if;
    return null;
end $$;

revoke all on function queues.notify_coalesce_ms() from public;
revoke all on sequence internal.task_notify_clock from public;
