-- A task a limit governs is written with its limit and bucket by the insert itself
-- (queues.insert_task, queues.insert_tasks), instead of inserted and then updated by the
-- statement trigger (internal.task_inserted), which wrote every limited task twice: the update
-- was half of a limited enqueue's time and left a dead version of the row behind
-- (docs/benchmarks.md, "A limited task written once"). The trigger still gives their limit to
-- tasks inserted any other way, and skips rows that have one.
\ir functions/internal/task_inserted.sql
\ir functions/queues/insert_task.sql
\ir functions/queues/insert_tasks.sql
