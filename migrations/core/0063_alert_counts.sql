-- Counts for the alerts (docs/operations.md, "Metrics and alerts").
--
-- queues.task_dead_tally counts, per task type, the tasks that went dead without a worker
-- recording it: their lease expired on their last attempt (queues.rescue_expired_leases), or
-- the worker running them was found dead (queues.reap_dead_workers, queues.reap_lost_sessions,
-- a worker restarted under its id: internal.recover_worker_tasks). A worker that fails a task
-- on its last attempt counts it itself (taskorch_tasks_failed_total{outcome="dead"}); these it
-- cannot. dead only grows; reported is how many of them the leaders have passed on to their
-- metrics (queues.take_dead_tally), so that each is counted once however the leadership moves.
-- One row per type that ever had such a task.

create table queues.task_dead_tally (
    task_type text primary key,
    dead bigint not null default 0,
    reported bigint not null default 0,
    constraint task_dead_tally_counts_valid check (dead >= 0 and reported >= 0 and reported <= dead)
);
revoke all on queues.task_dead_tally from public;
comment on table queues.task_dead_tally is
    'Per task type, the tasks that went dead by lease expiry or a dead worker''s recovery (dead), and how many of them a leader has reported in its metrics (reported; queues.take_dead_tally).';
