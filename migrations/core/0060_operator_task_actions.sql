-- Operators' task actions, by id or by filter, recorded with who did them
-- (docs/operations.md, "Runbook"; docs/sql.md, "Operators' actions").
--
-- queues.retry_tasks, cancel_tasks and delete_tasks act on up to 1,000 tasks named by id;
-- queues.retry_tasks_matching, cancel_tasks_matching and delete_tasks_matching on up to 1,000
-- tasks a filter matches, after a cursor (_after_task_id), so that a caller loops over any number
-- of tasks in short transactions: each call returns the last task id it looked at, and the next
-- call starts after it. queues.count_tasks_matching says how many tasks such a loop would act on
-- (a dry run). A procedure that commits between batches cannot be SECURITY DEFINER: the loop is
-- the caller's (the CLI's, the dashboard's, or a psql DO-less loop of statements).
--
-- Locks (docs/design.md, "Which statement locks what"): every call locks the tasks it acts on in
-- task_id order with SKIP LOCKED, FOR NO KEY UPDATE to retry or cancel, FOR UPDATE to delete, and
-- holds them for that one statement's transaction. It never waits: a task whose row another
-- transaction holds (its completion committing, a db_function's FOR KEY SHARE for a delete) is
-- skipped and reported ("busy" by id, "skipped" by filter); running the action again takes it.
--
-- Each task acted on gets an event row with the new column queues.task_event.actor: who did it
-- (the dashboard's signed-in name, the CLI's --actor; the database role when none is given).
-- worker_id keeps the database role, as queues.retry_task and cancel_task record it.
--
-- What delete means: only finished tasks (completed, failed, dead, cancelled) are deleted, never
-- a pending or running one (cancel it first). The task row goes with its error rows and signal
-- waits, as retention deletes it (queues.prune_finished); its lease and event history stays in
-- its day partitions until the leader drops the day, and a 'deleted' event with the actor is
-- added there, so that who deleted task 42 can still be found. Its idempotency key is free again.
--
-- Granted to nobody, the worker role included: grant them to an operator's role
-- (docs/security.md, "An operator's role").

-- Adding a nullable column without a default changes the catalog only, but takes the table's
-- (and each partition's) exclusive lock for a moment, behind any transaction that has written an
-- event and not committed (a long db_function's): waiting longer than 5 seconds fails the
-- migration, which is then run again, instead of stalling every worker behind it.
set local lock_timeout = '5s';
alter table queues.task_event add column actor text;
reset lock_timeout;
comment on column queues.task_event.actor is
    'Who did it, for an operator''s action (retried, cancelled, deleted by hand through queues.retry_tasks, cancel_tasks, delete_tasks and their _matching forms): the dashboard''s signed-in name or the CLI''s --actor, else the database role. NULL for what workers and the leader do.';
-- The functions (internal.operator_actor, internal.task_action_*, internal.check_task_filter,
-- internal.check_task_ids, internal.matching_tasks, internal.apply_task_action and the public
-- queues.*_tasks, *_tasks_matching and count_tasks_matching) are in their files under functions/.
