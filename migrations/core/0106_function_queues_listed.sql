-- One SQL function, one queue, continued (docs/sql.md, "Queue controls and the outbox"):
--
-- 1. The failed and dead db_function tasks get their function as key_scope, as core/0103 gave
--    it to the tasks in flight: a task retried by hand becomes pending as it is, and a pause of
--    its function (db_function:<schema.function>) must hold it; `taskorch queues list` and
--    queues.queue_stats count it under its function. A task without a key has key_scope '' by
--    core/0090, so no key's unique index can collide; the failed and dead tasks are few (read
--    through their partial index).
-- 2. The waiting tasks (workflow children whose parents have not ended) get the limit in force:
--    queues.set_limit and queues.remove_limit re-keyed only pending and running ones, so a
--    waiting task kept the limit of when it was enqueued and carried it once released. Both now
--    re-key waiting tasks too (internal.rekey_limited_tasks); this puts right those already stale.
update queues.task
set key_scope = payload ->> 'db_function'
where status in ('failed', 'dead') and task_type = 'db_function' and key_scope = ''
  and jsonb_typeof(payload -> 'db_function') = 'string';

update queues.task t
set limit_name = l.task_type,
    limit_key = case when l.task_type is not null then internal.limit_key(l.key_field, t.payload) end
from queues.task o
cross join lateral (select * from internal.limit_of(o.task_type, o.payload)) l
where o.task_id = t.task_id and o.status = 'waiting'
  and (o.limit_name, o.limit_key) is distinct from
      (l.task_type, case when l.task_type is not null then internal.limit_key(l.key_field, o.payload) end);
