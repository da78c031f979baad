-- Lets a paused schedule tick again from its next tick after now, recording who did it in
-- queues.schedule_event (docs/operations.md, "Steering a schedule").
create or replace function queues.resume_schedule(_name text, _next_run_at timestamptz, _actor text default null)
returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _s queues.schedule := internal.lock_schedule('resume_schedule', _name);
begin
    if _next_run_at is null then
        raise exception 'resume_schedule: _next_run_at must be the schedule''s first tick after now, got NULL'
            using errcode = 'invalid_parameter_value';
    end if;
    perform internal.check_finite('resume_schedule', '_next_run_at', _next_run_at);
    _actor := internal.operator_actor('resume_schedule', _actor);
    if _s.enabled then
        return false;
    end if;
    update queues.schedule set enabled = true, next_run_at = _next_run_at, updated_at = now() where name = _name;
    insert into queues.schedule_event (name, event, actor, detail)
    values (_name, 'resumed', _actor, jsonb_build_object('next_run_at', _next_run_at));
    return true;
end $$;
revoke all on function queues.resume_schedule(text, timestamptz, text) from public;
comment on function queues.resume_schedule(text, timestamptz, text) is
    'Lets a paused schedule tick again from _next_run_at (its first tick after now: what it missed while paused is not replayed), recording _actor; false when it was not paused.';
