-- Quiet workers (docs/operations.md, "Quieting a worker"): an operator tells one worker process
-- to finish the tasks it runs and claim nothing more, before a deploy or to look at it, and lets
-- it work again later.
--
-- - queues.worker_quiet holds one row per quieted worker: the process (instance) that was told,
--   when and by whom. It names the process, not only the id: a worker restarted under the same
--   id (a new process) is not quiet, as a restarted Sidekiq process is not. The row goes with the
--   worker's (a deregistration at shutdown, or the reaper).
-- - queues.quiet_worker and queues.resume_worker write and delete it, each recorded with who did
--   it in queues.worker_event.
-- - The worker learns it with its heartbeat (queues.heartbeat_worker_state): within one
--   heartbeat interval (5 s by default) it stops claiming and gives back the tasks it claimed
--   ahead that have not started.
--
-- Granted to nobody, the worker role included: grant queues.quiet_worker, queues.resume_worker
-- (and SELECT on queues.worker_quiet and queues.worker_event) to an operator's role
-- (docs/security.md, "An operator's role").

create table queues.worker_quiet (
    worker_id text primary key references queues.worker (worker_id) on delete cascade,
    instance text not null,
    quiet_since timestamptz not null default clock_timestamp(),
    actor text not null
);
revoke all on queues.worker_quiet from public;
comment on table queues.worker_quiet is
    'The quieted workers: the process (instance) of worker_id finishes what it runs and claims nothing more, from quiet_since, told by actor. Deleted by queues.resume_worker and with the worker''s row.';

create table queues.worker_event (
    worker_event_id bigint generated always as identity primary key,
    worker_id text not null,
    instance text,
    occurred_at timestamptz not null default clock_timestamp(),
    event text not null,
    actor text not null,
    constraint worker_event_event_valid check (event in ('quieted', 'resumed'))
);
create index worker_event_worker_idx on queues.worker_event (worker_id, worker_event_id);
create trigger worker_event_append_only before update on queues.worker_event
    for each statement execute function internal.refuse_update();
revoke all on queues.worker_event from public;
comment on table queues.worker_event is
    'Append-only: what operators did to workers (quieted, resumed), who (actor) and when. Kept after the worker stops; rows are rare (delete old ones by hand).';
-- The functions, queues.quiet_worker, resume_worker and heartbeat_worker_state, are in their
-- files under functions/.
