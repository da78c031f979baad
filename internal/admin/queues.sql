-- One row per task type: those with work in them (pending, running, failed or dead tasks), the
-- paused ones, those of the 2,000 newest tasks (a bounded walk of the primary key: types whose
-- tasks all finished stay listed for a while), and those that a registered worker claims or a
-- schedule enqueues: its backlog, how long its oldest due task has waited, its pause, and how
-- many registered workers claim it. Like
-- queues.queue_stats it reads only tasks that are not finished (plus failed and dead ones,
-- through their small partial index), so its cost follows the backlog, not the history: it
-- does not count completed or cancelled tasks. Each branch names its status as a literal so that
-- its partial index is used.
with live as (
    select task_type, status, run_at from queues.task where status = 'pending'
    union all
    select task_type, status, run_at from queues.task where status = 'running'
    union all
    select task_type, status, run_at from queues.task where status in ('failed', 'dead')
), counted as (
    select task_type,
           count(*) filter (where status = 'pending' and run_at <= now()) as due,
           count(*) filter (where status = 'pending' and run_at > now()) as scheduled,
           count(*) filter (where status = 'running') as running,
           count(*) filter (where status = 'failed') as failed,
           count(*) filter (where status = 'dead') as dead,
           coalesce(extract(epoch from now() - min(run_at) filter (where status = 'pending' and run_at <= now())), 0)::float8
               as oldest_due_seconds
    from live
    group by task_type
), known as (
    select task_type from counted
    union
    select task_type from queues.queue_pause
    union
    select task_type from (select task_type from queues.task order by task_id desc limit 2000) recent
    union
    select unnest(task_types) from queues.worker
    union
    select task_type from queues.schedule
)
select k.task_type, coalesce(c.due, 0), coalesce(c.scheduled, 0), coalesce(c.running, 0),
       coalesce(c.failed, 0), coalesce(c.dead, 0), coalesce(c.oldest_due_seconds, 0), p.paused_at, p.paused_by,
       -- The registered (live) workers that claim the type, as queues.queue_stats counts them:
       -- task_types NULL claims every type.
       (select count(*) from queues.worker w where w.task_types is null or k.task_type = any (w.task_types))
from known k
left join counted c on c.task_type = k.task_type
left join queues.queue_pause p on p.task_type = k.task_type
where k.task_type is not null
order by 1
