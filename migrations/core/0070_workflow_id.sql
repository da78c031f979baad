-- Workflows (docs/workflows.md, "Workflows"): tasks enqueued after one another form one workflow,
-- whose id is the id of its first task (the root, a task with no parents). A task enqueued with
-- parents takes the smallest of its parents' workflow ids (a parent without one, a root, gives
-- its own id): internal.attach_parents writes it at enqueue and never on the parent's row. The
-- root's own workflow_id stays NULL; a task with no parents and no children belongs to none.

alter table queues.task add column workflow_id bigint;
comment on column queues.task.workflow_id is
    'The workflow this task belongs to: the id of its first task, taken from its parents at enqueue (the smallest of theirs). NULL on a task without parents (a workflow''s root is found by its own id).';

create index task_workflow_idx on queues.task (workflow_id) where workflow_id is not null;

-- Tasks enqueued with parents before this migration: in id order (parents have smaller ids), so a
-- parent's workflow_id is set before its children's. A parent deleted since counts as its id.
do $$
declare
    _r record;
begin
    for _r in select t.task_id, t.after_ids from queues.task t where t.after_ids is not null order by t.task_id loop
        update queues.task c
        set workflow_id = coalesce(
            (select min(coalesce(p.workflow_id, p.task_id)) from queues.task p where p.task_id = any (_r.after_ids)),
            (select min(a) from unnest(_r.after_ids) a))
        where c.task_id = _r.task_id;
    end loop;
end $$;
