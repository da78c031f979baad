-- A task enqueued after parents without an idempotency key is written once (docs/workflows.md,
-- "How the release works"): internal.parents_of reads and locks its parents before the insert
-- and says what they make it (waiting, pending or cancelled), the insert writes that with the
-- row, and internal.attach_children writes its edges, counters, event and workflow row. Before,
-- the row was inserted pending and then updated by internal.attach_parents, which left a dead
-- row version and a dead claim-index entry per task. A task with a key is still inserted first
-- (only the insert says whether it is new) and updated by internal.attach_parents, now built on
-- the same two functions.
\ir functions/internal/parents_of.sql
\ir functions/internal/attach_children.sql
\ir functions/internal/attach_parents.sql
\ir functions/queues/insert_task.sql
\ir functions/queues/insert_tasks.sql
