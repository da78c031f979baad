-- Durable Go workflows enqueue tasks once (docs/workflows.md, "Enqueueing tasks once"): the
-- checkpoint of a spawn records the task it enqueued, in the same transaction.

alter table queues.workflow_step drop constraint workflow_step_kind_check;
alter table queues.workflow_step add constraint workflow_step_kind_check
    check (kind in ('step', 'step_tx', 'sleep', 'version', 'signal_wait', 'signal', 'spawn'));
