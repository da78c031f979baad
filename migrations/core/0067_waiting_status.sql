-- Tasks that wait for other tasks (docs/workflows.md): the status 'waiting', in a migration of its
-- own (a new enum value can be used only after the transaction that adds it commits).
--
-- A waiting task names parents (queues.enqueue's _after) that have not all ended. It is in no
-- claim index (task_claim_idx and the limit and debounce indexes are partial on 'pending' or
-- 'running'), spends no attempt and holds no limit slot; a parent's completion, failure or
-- cancellation makes it 'pending' (released) or 'cancelled' in the same transaction.

alter type queues.task_status add value if not exists 'waiting' before 'pending';
