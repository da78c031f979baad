-- Durable workflows in Go (docs/workflows.md, "Durable workflows in Go"): a workflow's progress
-- is one checkpoint row per durable call it completed, in call order, written under the task's
-- lease (queues.record_workflow_step) and read when it runs again (queues.workflow_steps), which
-- returns the recorded results instead of running the calls. Append-only; deleted with its task.

create table queues.workflow_step (
    task_id      bigint      not null references queues.task (task_id) on delete cascade,
    seq          integer     not null check (seq between 1 and 100000),
    kind         text        not null check (kind in ('step', 'step_tx', 'sleep', 'version')),
    name         text        not null check (name <> '' and length(name) <= 200),
    result       jsonb,
    wake_at      timestamptz,
    lease_id     bigint      not null,
    attempt      integer     not null,
    started_at   timestamptz,
    completed_at timestamptz not null default clock_timestamp(),
    primary key (task_id, seq)
);
comment on table queues.workflow_step is
    'A durable Go workflow''s checkpoints (docs/workflows.md, "Durable workflows in Go"): one row per durable call completed, at its position seq in the run; kind and name are what the code called (a re-run that calls something else there fails as nondeterministic), result is the call''s JSON result, wake_at a sleep''s end; lease_id and attempt are the claim that wrote it. Append-only; deleted with its task.';
create trigger workflow_step_append_only before update on queues.workflow_step
    for each statement execute function internal.refuse_update();
revoke all on queues.workflow_step from public;
