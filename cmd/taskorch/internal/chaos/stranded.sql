-- The stranded-time report (stranded.go): for each kill ($1: the killed worker ids, $2: the
-- kill times, in order), every lease the worker held at the kill — claimed before it, ended
-- after it — with how it ended and how many seconds after the kill.
--
-- How a lease ends: an event under it (queues.task_event: lease_expired, recovered by the
-- leader — its detail says whether the worker's session was lost, it registered again, or it
-- stopped heartbeating —, or the worker's own failure or retry), or its completion
-- (chaos.completion, the fixture's witness). "finished" is the dying worker's own outcome, in
-- flight at the kill: not a release.
with k as (
    select u.ord::integer as kill, u.worker_id, u.killed_at
    from unnest($1::text[], $2::timestamptz[]) with ordinality as u(worker_id, killed_at, ord)
), held as (
    select k.kill, k.killed_at, l.task_id, l.task_lease_id
    from k
    join queues.task_lease l on l.worker_id = k.worker_id and l.leased_at <= k.killed_at
), ended as (
    select h.kill, h.killed_at, ev.event, ev.detail, coalesce(ev.occurred_at, c.completed_at) as ended_at
    from held h
    left join lateral (
        select e.occurred_at, e.event, e.detail
        from queues.task_event e
        where e.task_id = h.task_id and e.lease_id = h.task_lease_id
        order by e.occurred_at, e.task_event_id
        limit 1
    ) ev on true
    left join lateral (
        select min(c.completed_at) as completed_at
        from chaos.completion c
        where c.task_id = h.task_id and c.lease_id = h.task_lease_id
    ) c on true
)
select kill,
       case
           when event is null then 'finished'
           when event = 'lease_expired' then 'lease_expired'
           when event = 'recovered' and detail like '%database session%' then 'session'
           when event = 'recovered' and detail like '%registered again%' then 'restart'
           when event = 'recovered' then 'heartbeat'
           when event in ('retry_scheduled', 'failed', 'dead', 'snoozed') then 'finished'
           else 'other'
       end as way,
       extract(epoch from ended_at - killed_at)::float8 as stranded_seconds
from ended
where ended_at >= killed_at
order by kill;
