-- Retrying a node of a workflow by hand (docs/workflows.md, "Retrying a node"): a task retried
-- by hand waits for its parents that have not ended, and the tasks its cascade cancelled wait
-- again, transitively. Finding a task's children by its id needs an index on after_ids (the
-- edges of an ended parent are gone); it is partial, so tasks without parents pay nothing.

create index task_after_ids_idx on queues.task using gin (after_ids) where after_ids is not null;
