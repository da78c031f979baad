-- A task type may not begin with db_function: (docs/sql.md, "Task types"). That prefix names a
-- SQL function's limit and queue ('db_function:billing.recalc'), and a task of that literal
-- type was governed by the function's limit and claimed by every worker that runs SQL
-- functions, though none asked for its type: an application role could enqueue one, with no
-- permit for the function, and spend the function's running slots or rate tokens on a task no
-- worker could run. The enqueue and insert functions refuse it (22023), and so does the row
-- trigger for any other insert (23514, task_type_valid). Tasks of such types already written are
-- left as they are.
\ir functions/internal/check_task_input.sql
\ir functions/internal/check_task_row_input.sql
\ir functions/queues/insert_task.sql
\ir functions/queues/insert_tasks.sql
