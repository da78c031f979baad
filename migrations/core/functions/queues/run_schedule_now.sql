-- Enqueues one task of a schedule now, outside its ticks, recording who did it in
-- queues.schedule_event (docs/operations.md, "Steering a schedule").
create or replace function queues.run_schedule_now(_name text, _actor text default null)
returns bigint
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _s queues.schedule := internal.lock_schedule('run_schedule_now', _name);
    _at timestamptz := clock_timestamp();
    _id bigint;
begin
    _actor := internal.operator_actor('run_schedule_now', _actor);
    select r.task_id into _id
    from internal.insert_schedule_task(_s, _at,
        'schedule:' || _s.name || ':now:' || to_char(_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')) r;
    insert into queues.schedule_event (name, event, actor, detail)
    values (_name, 'run_now', _actor, jsonb_build_object('task_id', _id));
    return _id;
end $$;
revoke all on function queues.run_schedule_now(text, text) from public;
comment on function queues.run_schedule_now(text, text) is
    'Enqueues one task of the schedule now, outside its ticks (next_run_at does not move; a paused schedule runs too), recording _actor; returns the task''s id.';
