-- The two statement triggers every insert into queues.task fired (task_inserted_limit_keys, then
-- task_inserted_notify) become one, task_inserted, that does both in the same order
-- (internal.task_inserted): each trigger call, with its change of search_path, cost a one-row
-- enqueue a few µs of the server's time (docs/benchmarks.md, "The cost of a one-row write").
\ir functions/internal/task_inserted.sql

drop trigger task_inserted_limit_keys on queues.task;
drop trigger task_inserted_notify on queues.task;
create trigger task_inserted after insert on queues.task
    referencing new table as inserted_tasks
    for each statement execute function internal.task_inserted();

drop function internal.set_inserted_limit_keys();
drop function internal.notify_task_inserted();
