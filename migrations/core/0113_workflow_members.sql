-- A workflow's tasks are found through queues.workflow_task (docs/workflows.md, "Workflows"),
-- one row per task that took a workflow's id from its parents, written once at enqueue by
-- internal.attach_parents and deleted with the task. Before, an index on
-- queues.task.workflow_id found them, and every update of such a task (its release, claim and
-- completion, none of them HOT: each changes the status) added an entry to it: about 4-5 µs of
-- a diamond task's 42 in the database (docs/benchmarks.md, "Workflow tasks without an index on
-- workflow_id"). The column stays as it was; only its index goes. internal.resolve_parents
-- releases a child that waits for one completed parent in the statement that deletes its edge.

create table queues.workflow_task (
    workflow_id bigint not null,
    task_id bigint not null,
    primary key (workflow_id, task_id)
);
comment on table queues.workflow_task is
    'The tasks of each workflow but its first (whose id is the workflow''s): one row per task whose queues.task.workflow_id is set, written at enqueue, deleted with the task. Join it to queues.task to read a workflow''s tasks.';
revoke all on queues.workflow_task from public;

insert into queues.workflow_task (workflow_id, task_id)
select t.workflow_id, t.task_id from queues.task t where t.workflow_id is not null;

drop index queues.task_workflow_idx;

\ir functions/internal/attach_parents.sql
\ir functions/internal/forget_parents.sql
\ir functions/queues/cancel_workflow.sql
\ir functions/internal/resolve_parents.sql
