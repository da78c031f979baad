-- Takes one token per task of a rate-limited type that the claim has just leased (called after
-- internal.lease_tasks, in the claim's transaction), at the lease's own time: a bucket's clock is
-- then the claimed_at of the tasks it let through, so the rate holds exactly on the times a
-- reader sees (no one-second window of claimed_at holds more than burst + rate), however long
-- the claim's backend took between choosing its tasks and leasing them. _clock, read before the
-- tasks were chosen, is the clock of a task not leased (none, normally). The caller holds the
-- types' limit rows (internal.limited_candidates locked them, until its transaction ends), so
-- claims of one limit take their tokens one after another, in lease order. Taking at the lease's
-- time, later than the clock the candidates were chosen by, never takes a token that was not
-- there: the bucket has only refilled since. Without a rate limit it reads nothing.
create or replace function internal.take_limit_tokens(_task_ids bigint[], _clock timestamptz) returns void
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if not exists (select from queues.task_limit r where r.rate_per_second is not null) then
        return;
    end if;
    with taken as (
        select t.limit_name as task_type, t.limit_key, count(*) as n,
               coalesce(max(t.claimed_at) filter (where t.status = 'running'), _clock) as at
        from queues.task t
        where t.task_id = any (_task_ids) and t.limit_name is not null
        group by t.limit_name, t.limit_key
    )
    insert into queues.limit_bucket as b (task_type, limit_key, tokens, refilled_at)
    select x.task_type, x.limit_key,
           least(l.burst::double precision,
                 coalesce(o.tokens, l.burst) + l.rate_per_second
                     * greatest(0, extract(epoch from x.at - coalesce(o.refilled_at, x.at)))) - x.n,
           greatest(x.at, coalesce(o.refilled_at, x.at))
    from taken x
    join queues.task_limit l on l.task_type = x.task_type and l.rate_per_second is not null
    left join queues.limit_bucket o on o.task_type = x.task_type and o.limit_key = x.limit_key
    on conflict (task_type, limit_key) do update
    set tokens = excluded.tokens, refilled_at = excluded.refilled_at;
end $$;
revoke all on function internal.take_limit_tokens(bigint[], timestamp with time zone) from public;
