-- Completions per time bucket since $1 ($2 wide), from the tasks' own rows: the newest $3
-- completions at most, read through task_finished_idx from the newest down (the caller says the
-- chart is partial when the cap is reached). A task completed although its channel call failed
-- (call_failure, queues.complete_failed_call) is a failed attempt, not a success. For a
-- completed task the index's finish time is its completed_at.
select date_bin($2::interval, c.at, $1::timestamptz) as bucket,
       count(*) filter (where not c.call_failed) as completed,
       count(*) filter (where c.call_failed) as call_failures,
       count(*) as n
from (
    select greatest(t.completed_at, t.cancelled_at, t.failed_at, t.dead_at) as at,
           t.call_failure is not null as call_failed
    from queues.task t
    where t.status in ('completed', 'cancelled', 'failed', 'dead')  -- task_finished_idx's predicate
      and t.status = 'completed'
      and greatest(t.completed_at, t.cancelled_at, t.failed_at, t.dead_at) >= $1
    order by greatest(t.completed_at, t.cancelled_at, t.failed_at, t.dead_at) desc
    limit $3
) c
group by 1
order by 1
