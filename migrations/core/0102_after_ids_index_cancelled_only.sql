-- The index that finds the children of a retried task (docs/workflows.md, "Retrying a node")
-- holds the cancelled tasks only: the retry looks for children the cascade cancelled, and no
-- other status. Before, every task with parents was in it, so each claim, release and
-- completion of such a task (none of them HOT) added its after_ids to a GIN index.
drop index queues.task_after_ids_idx;
create index task_after_ids_idx on queues.task using gin (after_ids)
    where after_ids is not null and status = 'cancelled';
