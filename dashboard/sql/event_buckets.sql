-- Failed attempts per time bucket since $1 ($2 wide), from the events with an id of at least $3
-- (event_boundary.sql, capped by the caller), read through the primary key. Completions are
-- counted from the tasks' rows (completion_buckets.sql): a completion writes no event (a
-- 'completed' event stored before migration 0032 is left out here, not counted twice).
select date_bin($2::interval, e.occurred_at, $1::timestamptz) as bucket,
       count(*) as failures
from queues.task_event e
where e.task_event_id >= $3
  and e.occurred_at >= $1
  and e.event in ('retry_scheduled', 'failed', 'dead', 'lease_expired', 'recovered')
group by 1
order by 1
