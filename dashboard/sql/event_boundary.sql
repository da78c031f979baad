-- The first task_event_id at or after $1, by binary search over the primary key (about 40
-- probes of one index entry each), instead of a scan: task_event has no index on occurred_at,
-- and ids grow with time (an event's occurred_at is its transaction's start, so the boundary
-- can be off by the length of a transaction, which a chart of minutes does not notice).
-- Returns the boundary and the largest id.
with recursive bounds (lo, hi) as (
    select coalesce((select min(task_event_id) from queues.task_event), 0),
           coalesce((select max(task_event_id) from queues.task_event), 0) + 1
  union all
    select case when p.occurred_at >= $1 then b.lo else p.task_event_id + 1 end,
           case when p.occurred_at >= $1 then (b.lo + b.hi) / 2 else b.hi end
    from bounds b
    cross join lateral (
        select e.task_event_id, e.occurred_at
        from queues.task_event e
        where e.task_event_id >= (b.lo + b.hi) / 2
        order by e.task_event_id
        limit 1) p
    where b.lo < b.hi
)
select max(lo), coalesce((select max(task_event_id) from queues.task_event), 0) from bounds
