-- One row per task type with work in it (pending, running, failed or dead tasks) or paused:
-- its backlog, how long its oldest due task has waited, and its pause. Like queues.queue_stats
-- it reads only tasks that are not finished (plus failed and dead ones, through their small
-- partial index), so its cost follows the backlog, not the history. Each branch names its
-- status as a literal so that its partial index is used.
with live as (
    select task_type, status, run_at from queues.task where status = 'pending'
    union all
    select task_type, status, run_at from queues.task where status = 'running'
    union all
    select task_type, status, run_at from queues.task where status in ('failed', 'dead')
), types as (
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
)
select coalesce(t.task_type, p.task_type), coalesce(t.due, 0), coalesce(t.scheduled, 0), coalesce(t.running, 0),
       coalesce(t.failed, 0), coalesce(t.dead, 0), coalesce(t.oldest_due_seconds, 0), p.paused_at, p.paused_by
from types t
full join queues.queue_pause p on p.task_type = t.task_type
order by 1
