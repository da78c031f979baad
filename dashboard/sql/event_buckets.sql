-- Completions and failed attempts per time bucket since $1 ($2 wide), from the events with an
-- id of at least $3 (event_boundary.sql, capped by the caller), read through the primary key.
-- A 'completed' event with a detail is a channel task completed although its call failed
-- (queues.complete_failed_call): a failed attempt, not a success.
select date_bin($2::interval, e.occurred_at, $1::timestamptz) as bucket,
       count(*) filter (where e.event = 'completed' and e.detail is null) as completed,
       count(*) filter (where e.event in ('retry_scheduled', 'failed', 'dead', 'lease_expired', 'recovered')
                           or (e.event = 'completed' and e.detail is not null)) as failures
from queues.task_event e
where e.task_event_id >= $3
  and e.occurred_at >= $1
  and e.event in ('completed', 'retry_scheduled', 'failed', 'dead', 'lease_expired', 'recovered')
group by 1
order by 1
