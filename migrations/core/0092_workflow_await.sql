-- Durable Go workflows wait for tasks without holding a slot (docs/workflows.md, "Waiting for
-- tasks"): the checkpoint of an await records each task's status when the last one ended.

alter table queues.workflow_step drop constraint workflow_step_kind_check;
alter table queues.workflow_step add constraint workflow_step_kind_check
    check (kind in ('step', 'step_tx', 'sleep', 'version', 'signal_wait', 'signal', 'spawn', 'await'));
