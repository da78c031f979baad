-- A supervisor's tick is inserted by its owner's code directly: it asks for its permit first. Its
-- debounce key (tick:<supervisor>, scoped by the supervisor: queues.task.key_scope) is one only
-- the system may use, and the tick is the system's own task (enqueued_by NULL). A tick a limit
-- governs is written with its limit and bucket (internal.limit_of) by the insert.
create or replace function internal.schedule_supervisor_tick(_supervisor text, _at timestamptz) returns void
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _key text := internal.supervisor_tick_key(_supervisor);
    _payload jsonb := jsonb_build_object('db_function', _supervisor, 'tick', true);
    _limit_name text;
    _limit_key text;
begin
    _at := coalesce(_at, now());
    -- A process started "at -infinity" would otherwise stop at the table's constraint.
    perform internal.check_finite('schedule_supervisor_tick', 'the time a process is due (_at, a kickoff''s _scheduled_at)', _at);
    if exists (select 1 from queues.task
               where task_type = 'db_function' and key_scope = _supervisor and debounce_key = _key
                 and status = 'pending' and run_at <= _at) then
        return;
    end if;
    perform queues.permit_task_functions(array['db_function'], array[jsonb_build_object('db_function', _supervisor)]);
    if exists (select from queues.task_limit) then
        select l.task_type, internal.limit_key(l.key_field, _payload) into _limit_name, _limit_key
        from internal.limit_of('db_function', _payload) l
        where l.task_type is not null;
    end if;
    insert into queues.task as t (task_type, payload, scheduled_at, run_at, max_attempts, debounce_key, enqueued_by,
                                  limit_name, limit_key)
    values ('db_function', _payload, _at, _at, queues.default_max_attempts(), _key, null, _limit_name, _limit_key)
    on conflict (task_type, key_scope, debounce_key) where status = 'pending' and debounce_key is not null
    do update set run_at = excluded.run_at, scheduled_at = excluded.scheduled_at
        where t.run_at > excluded.run_at;
    perform internal.drop_enqueue_permits();
    -- A moved tick is not an insert: wake the workers as the insert trigger would.
    perform pg_notify('taskorch_task', '');
end $$;
revoke all on function internal.schedule_supervisor_tick(text, timestamp with time zone) from public;
