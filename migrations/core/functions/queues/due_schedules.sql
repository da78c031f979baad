-- The enabled schedules with a tick due at _now (next_run_at <= _now), and those whose
-- next_run_at the leader has yet to compute. Read by the leader every ScheduleInterval.
create or replace function queues.due_schedules(_now timestamptz)
returns table (name text, cron text, next_run_at timestamptz)
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select s.name, s.cron, s.next_run_at
    from queues.schedule s
    where s.enabled and (s.next_run_at is null or s.next_run_at <= _now)
    order by s.next_run_at nulls first, s.name
$$;
revoke all on function queues.due_schedules(timestamp with time zone) from public;
grant execute on function queues.due_schedules(timestamp with time zone) to worker_service_user;
