-- Which task types no live worker claims (docs/operations.md, "Task types no worker claims").
--
-- A worker claims only the task types it can run: db_function, its Go handlers' types and the
-- channels it has a provider for (WorkerConfig.ClaimUnknownTypes turns that off). It records
-- them in queues.worker.task_types when it registers (queues.register_worker's _task_types); a
-- worker that claims every type records NULL. A type whose due tasks no registered worker
-- claims waits until one that does starts: queue_stats now says so, for the leader's gauge
-- taskorch_queue_unserved, and `taskorch queues list` and the dashboard read the same column.
--
-- queue_stats keeps its columns and adds two: due, the pending tasks whose run_at has come, and
-- workers, how many registered workers claim the type (NULL task_types counts for every type).
-- A registered worker is a live one: the leader deletes the row of a worker whose heartbeat is
-- older than the worker timeout. The extra columns cost no extra scan: workers is counted per
-- group, over the small workers table. Its result type changes, so it is dropped and created
-- again, with its grant; callers name the columns they read.

comment on column queues.worker.task_types is
    'The task types this worker claims (db_function, its Go handlers, the channels it has a provider for); NULL: every type.';

drop function queues.queue_stats();
-- Its file (functions/queues/queue_stats.sql) creates it again.
