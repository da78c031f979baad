-- One row per queue: a task type, or one SQL function's db_function tasks, named
-- db_function:<schema.function> (the name queues.pause_queue and queues.set_limit take; docs/sql.md,
-- "Queue controls and the outbox"). Listed: those with work in them (pending, running, failed or
-- dead tasks), the paused ones, those of the 2,000 newest tasks (a bounded walk of the primary
-- key: queues whose tasks all finished stay listed for a while), and those that a registered
-- worker claims or a schedule enqueues: its backlog, how long its oldest due task has waited, its
-- pause, and how many registered workers claim it. A worker claims task types, so one that claims
-- db_function serves every function: a function's line counts those, and the type db_function
-- has no line of its own unless it is paused itself (which holds every function) or a task of it
-- names no function. Like
-- queues.queue_stats it reads only tasks that are not finished (plus failed and dead ones,
-- through their small partial index), so its cost follows the backlog, not the history: it
-- does not count completed or cancelled tasks. Each branch names its status as a literal so that
-- its partial index is used. A db_function task's function is its key_scope (set when it is
-- inserted; core/0103 and core/0106 gave it to the older tasks), else its payload's.
with live as (
    select task_type, key_scope, payload, status, run_at from queues.task where status = 'pending'
    union all
    select task_type, key_scope, payload, status, run_at from queues.task where status = 'running'
    union all
    select task_type, key_scope, payload, status, run_at from queues.task where status in ('failed', 'dead')
), counted as (
    select case when task_type = 'db_function'
                then coalesce('db_function:' || coalesce(nullif(key_scope, ''), payload ->> 'db_function'), task_type)
                else task_type end as queue,
           count(*) filter (where status = 'pending' and run_at <= now()) as due,
           count(*) filter (where status = 'pending' and run_at > now()) as scheduled,
           count(*) filter (where status = 'running') as running,
           count(*) filter (where status = 'failed') as failed,
           count(*) filter (where status = 'dead') as dead,
           coalesce(extract(epoch from now() - min(run_at) filter (where status = 'pending' and run_at <= now())), 0)::float8
               as oldest_due_seconds
    from live
    group by 1
), known as (
    select queue from counted
    union
    select task_type from queues.queue_pause
    union
    select case when task_type = 'db_function'
                then 'db_function:' || coalesce(nullif(key_scope, ''), payload ->> 'db_function')
                else task_type end
    from (select task_type, key_scope, payload from queues.task order by task_id desc limit 2000) recent
    union
    -- A worker that claims db_function serves the functions: they are listed by their tasks.
    select t from queues.worker, unnest(task_types) t where t <> 'db_function'
    union
    select case when task_type = 'db_function' then 'db_function:' || (payload ->> 'db_function') else task_type end
    from queues.schedule
), claimers as (
    -- The registered (live) workers that claim each type, as queues.queue_stats counts them, and
    -- (every_type) those whose task_types is NULL, which claim every type. Counted once here
    -- and joined, not per line: a subquery per line made the planner's estimate, over the small
    -- tables never analyzed, cross the JIT threshold (tens of ms compiling a 3 ms query).
    select u.t as task_type, count(*) as n
    from queues.worker w cross join lateral (select distinct t from unnest(w.task_types) t) u
    group by u.t
)
select k.queue, coalesce(c.due, 0), coalesce(c.scheduled, 0), coalesce(c.running, 0),
       coalesce(c.failed, 0), coalesce(c.dead, 0), coalesce(c.oldest_due_seconds, 0),
       -- A function's own pause, else its type's (pausing db_function holds every function).
       coalesce(p.paused_at, tp.paused_at), case when p.task_type is not null then p.paused_by else tp.paused_by end,
       case when p.task_type is null and tp.task_type is not null then tp.task_type end,
       coalesce(w.n, 0) + (select count(*) from queues.worker where task_types is null)
from known k
cross join lateral (select case when k.queue like 'db_function:%' then 'db_function' else k.queue end as task_type) b
left join counted c on c.queue = k.queue
left join claimers w on w.task_type = b.task_type
left join queues.queue_pause p on p.task_type = k.queue
left join queues.queue_pause tp on tp.task_type = b.task_type and b.task_type <> k.queue
where k.queue is not null
order by 1
