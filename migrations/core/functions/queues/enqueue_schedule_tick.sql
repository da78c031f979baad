-- The leader's step for one schedule, in one transaction: enqueues the task of tick _tick (NULL:
-- none, only set next_run_at) with the idempotency key schedule:<name>:<tick in UTC RFC 3339>,
-- so a tick is enqueued once however many leaders overlap, and moves next_run_at to
-- _next_run_at (never backwards). Returns the task id (an existing one for a tick enqueued
-- before); NULL when nothing was enqueued: no tick, _term is not the current leader term, or
-- the schedule was removed, disabled or given another cron expression (_cron is the one the
-- leader computed with) meanwhile.
create or replace function queues.enqueue_schedule_tick(
    _name text,
    _cron text,
    _tick timestamptz,
    _next_run_at timestamptz,
    _term bigint)
returns bigint
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _s queues.schedule;
    _id bigint;
begin
    if not internal.holds_leader_term(_term) then
        return null;
    end if;
    select * into _s from queues.schedule where name = _name for update;
    if not found or not _s.enabled or _s.cron is distinct from _cron then
        return null;
    end if;
    if _tick is not null then
        select r.task_id into _id from internal.insert_schedule_task(_s, _tick, internal.schedule_tick_key(_s.name, _tick)) r;
    end if;
    update queues.schedule
    set next_run_at = greatest(next_run_at, _next_run_at),
        last_tick_at = case when _id is null then last_tick_at else _tick end,
        last_enqueued_at = case when _id is null then last_enqueued_at else now() end,
        last_task_id = coalesce(_id, last_task_id)
    where name = _name;
    return _id;
end $$;
revoke all on function queues.enqueue_schedule_tick(text, text, timestamp with time zone, timestamp with time zone, bigint) from public;
grant execute on function queues.enqueue_schedule_tick(text, text, timestamp with time zone, timestamp with time zone, bigint) to worker_service_user;
