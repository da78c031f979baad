-- One row per limit and bucket in use (a bucket with tasks running, due or waiting for tokens):
-- the limit, how many of its tasks run, how many due tasks it holds back, and its tokens now.
create or replace view queues.limit_status as
with buckets as (
    select t.limit_name as task_type, t.limit_key,
           count(*) filter (where t.status = 'running') as running,
           count(*) filter (where t.status = 'pending' and t.run_at <= now()) as held
    from queues.task t
    where t.limit_name is not null and t.status in ('pending', 'running')
    group by t.limit_name, t.limit_key
)
select l.task_type,
       l.max_running,
       l.rate_per_second,
       case when l.rate_per_second is not null then l.burst end as burst,
       l.key_field,
       case when b.limit_key like '=%' then substr(b.limit_key, 2) end as key,
       coalesce(b.limit_key = '*', false) as null_key,
       coalesce(b.running, 0) as running,
       coalesce(b.held, 0) as held,
       case when l.rate_per_second is not null then
           least(l.burst::double precision,
                 coalesce(k.tokens, l.burst) + l.rate_per_second
                     * greatest(0, extract(epoch from clock_timestamp() - coalesce(k.refilled_at, clock_timestamp()))))
       end as tokens
from queues.task_limit l
left join buckets b on b.task_type = l.task_type
left join queues.limit_bucket k on k.task_type = l.task_type and k.limit_key = b.limit_key;
revoke all on queues.limit_status from public;
comment on view queues.limit_status is 'Each limit and each of its buckets in use: running tasks, due tasks held back, tokens now (rate limits). A limit with no task in use shows one row with NULL key.';
