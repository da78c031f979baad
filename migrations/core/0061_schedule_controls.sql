-- Schedules an operator can steer (docs/operations.md, "Steering a schedule"): pause and resume,
-- run now, backfill a window; each recorded with who did it in queues.schedule_event.
--
-- - queues.pause_schedule and queues.resume_schedule turn queues.schedule.enabled off and on. A
--   resumed schedule starts at _next_run_at, the first tick after now that the caller computes
--   with the leader's cron parser (admin.ResumeSchedule), so it does not replay what it missed
--   while paused (queues.add_schedule does the same when it enables a schedule again).
-- - queues.run_schedule_now enqueues one task of the schedule now, outside its ticks: its
--   next_run_at and last tick do not move. Its key is schedule:<name>:now:<the time, to the
--   microsecond>, so it is told apart from a tick's (schedule:<name>:<tick>).
-- - queues.backfill_schedule enqueues the given ticks, each under the tick's own idempotency key
--   (internal.schedule_tick_key, the leader's): a tick already enqueued (by the leader or an
--   earlier backfill, as long as its task is kept) is not enqueued again. The SQL cannot parse
--   cron: the caller computes a window's ticks with the leader's parser (admin.BackfillSchedule),
--   up to 1,000 a call; ticks in the future are refused (the leader enqueues those).
--
-- Granted to nobody, the worker role included: grant them (and SELECT on queues.schedule_event)
-- to an operator's role (docs/security.md, "An operator's role").

create table queues.schedule_event (
    schedule_event_id bigint generated always as identity primary key,
    name text not null,
    occurred_at timestamptz not null default clock_timestamp(),
    event text not null,
    actor text not null,
    detail jsonb not null default '{}',
    constraint schedule_event_event_valid check (event in ('paused', 'resumed', 'run_now', 'backfilled')),
    constraint schedule_event_detail_object check (jsonb_typeof(detail) = 'object')
);
create index schedule_event_name_idx on queues.schedule_event (name, schedule_event_id);
create trigger schedule_event_append_only before update on queues.schedule_event
    for each statement execute function internal.refuse_update();
revoke all on queues.schedule_event from public;
comment on table queues.schedule_event is
    'Append-only: what operators did to schedules (paused, resumed, run_now, backfilled), who (actor) and when; detail holds the task of a run and a backfill''s counts. Kept when the schedule is removed; rows are rare (delete old ones by hand).';
-- The functions, internal.lock_schedule and queues.pause_schedule, resume_schedule,
-- run_schedule_now and backfill_schedule, are in their files under functions/.
