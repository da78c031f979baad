-- Trigger of queues.task (after insert, per statement): one NOTIFY taskorch_task per inserting
-- statement, coalesced by queues.notify_coalesce_ms() (docs/design.md, "Enqueue").
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
revoke all on function internal.notify_task_inserted() from public;
