-- Pauses a schedule's ticks, recording who did it in queues.schedule_event (docs/operations.md,
-- "Steering a schedule").
create or replace function queues.pause_schedule(_name text, _actor text default null)
returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _s queues.schedule := internal.lock_schedule('pause_schedule', _name);
begin
    _actor := internal.operator_actor('pause_schedule', _actor);
    if not _s.enabled then
        return false;
    end if;
    update queues.schedule set enabled = false, updated_at = now() where name = _name;
    insert into queues.schedule_event (name, event, actor) values (_name, 'paused', _actor);
    return true;
end $$;
revoke all on function queues.pause_schedule(text, text) from public;
comment on function queues.pause_schedule(text, text) is
    'Stops a schedule''s ticks (enabled = false), recording _actor (default: the database role); false when it was paused already. The tasks it enqueued are untouched.';
