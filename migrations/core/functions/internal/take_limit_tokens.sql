-- Takes one token per leased task of a rate-limited type from its bucket. The caller holds the
-- types' limit rows (internal.limited_candidates locked them), so no other claim changes these
-- buckets meanwhile.
create or replace function internal.take_limit_tokens(_task_ids bigint[], _clock timestamptz) returns void
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    with taken as (
        select t.limit_name as task_type, t.limit_key, count(*) as n
        from queues.task t
        where t.task_id = any (_task_ids) and t.limit_name is not null
        group by t.limit_name, t.limit_key
    )
    insert into queues.limit_bucket as b (task_type, limit_key, tokens, refilled_at)
    select x.task_type, x.limit_key,
           least(l.burst::double precision,
                 coalesce(o.tokens, l.burst) + l.rate_per_second
                     * greatest(0, extract(epoch from _clock - coalesce(o.refilled_at, _clock)))) - x.n,
           greatest(_clock, coalesce(o.refilled_at, _clock))
    from taken x
    join queues.task_limit l on l.task_type = x.task_type and l.rate_per_second is not null
    left join queues.limit_bucket o on o.task_type = x.task_type and o.limit_key = x.limit_key
    on conflict (task_type, limit_key) do update
    set tokens = excluded.tokens, refilled_at = excluded.refilled_at
$$;
revoke all on function internal.take_limit_tokens(bigint[], timestamp with time zone) from public;
