-- A worker's completion may lease the workflow children it releases to that worker in the same
-- update (queues.complete_tasks_and_take; docs/workflows.md, "Children run by the worker that
-- released them"): a child no limit governs, of a type the worker runs, due, of no paused queue
-- and of a priority no lower than any unlimited pending task's is then written once (waiting to
-- running) instead of twice (waiting to pending, then pending to running by a claim).
-- internal.resolve_parents takes the worker and returns the children it leased;
-- queues.complete_tasks_with_results is the same completion taking none.
drop function if exists internal.resolve_parents(bigint[], queues.task_status[]);
\ir functions/internal/resolve_parents.sql
\ir functions/queues/complete_tasks_and_take.sql
\ir functions/queues/complete_tasks_with_results.sql
\ir functions/queues/leased_tasks.sql
