-- The other ways a task is inserted write a governed task's limit and bucket with the row too:
-- a debounced enqueue (queues.insert_debounced_task, whose enqueue again of a waiting task now
-- sets the new payload's bucket in the same update), a schedule's task
-- (internal.insert_schedule_task) and a supervisor's tick (internal.schedule_supervisor_tick).
-- Each wrote a limited task twice: inserted, then updated by the statement trigger
-- (internal.task_inserted), which now covers only rows inserted by hand.
\ir functions/queues/insert_debounced_task.sql
\ir functions/internal/insert_schedule_task.sql
\ir functions/internal/schedule_supervisor_tick.sql
\ir functions/internal/task_inserted.sql
