-- Durable workflows in Go wait for signals (docs/workflows.md, "Waiting for a signal"): a wait's
-- deadline is a checkpoint of its own ('signal_wait', fixed at its first run), and what it got is
-- another ('signal': received with the payload, or not by the deadline).

alter table queues.workflow_step drop constraint workflow_step_kind_check;
alter table queues.workflow_step add constraint workflow_step_kind_check
    check (kind in ('step', 'step_tx', 'sleep', 'version', 'signal_wait', 'signal'));
