-- One SQL function, one queue (docs/sql.md, "Queue controls and the outbox"): a db_function task's
-- queue is db_function:<its function>, which pause_queue pauses alone, as a limit of that name
-- limits it. The claim finds a task's function in queues.task.key_scope (core/0090), which the
-- insert trigger sets on every db_function task; core/0090 filled it only for the tasks with a
-- key. The db_function tasks that have not ended get theirs now, so pausing a function holds
-- the tasks enqueued before this version too.
update queues.task
set key_scope = payload ->> 'db_function'
where task_type = 'db_function' and key_scope = ''
  and status in ('pending', 'running', 'waiting')
  and jsonb_typeof(payload -> 'db_function') = 'string';
