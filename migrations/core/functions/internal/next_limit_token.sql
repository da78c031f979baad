-- Of the rate limits of _task_types (NULL: every type) that are not paused (_paused) — or of the
-- one limit _only when given — the one whose next token comes first, and the seconds until its
-- bucket holds enough for a claim to take it (1 - slack, internal.limit_slack, and 0.1 ms more
-- so that the claim finds it there): 0 or less when a token is there now. It reads the
-- buckets of up to 64 keys with due tasks of each limit, by a skip scan of its index, as
-- queues.limit_wait does. No row when no rate limit holds a due task.
create or replace function internal.next_limit_token(_task_types text[], _paused text[], _only text default null)
returns table (limit_name text, seconds double precision)
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select l.task_type,
           min((1 - internal.limit_slack(l.rate_per_second)
                - least(l.burst::double precision,
                        coalesce(b.tokens, l.burst) + l.rate_per_second
                            * greatest(0, extract(epoch from clock_timestamp() - coalesce(b.refilled_at, clock_timestamp())))))
               / l.rate_per_second) + 0.0001
    from queues.task_limit l
    cross join lateral (
        with recursive keys(limit_key, n) as (
            select (select t.limit_key from queues.task t
                    where t.limit_name = l.task_type and t.status = 'pending' and t.run_at <= now()
                    order by t.limit_key limit 1), 1
            union all
            select (select t.limit_key from queues.task t
                    where t.limit_name = l.task_type and t.status = 'pending' and t.run_at <= now()
                      and t.limit_key > keys.limit_key
                    order by t.limit_key limit 1), keys.n + 1
            from keys where keys.limit_key is not null and keys.n < 64
        )
        select keys.limit_key from keys where keys.limit_key is not null) k
    left join queues.limit_bucket b on b.task_type = l.task_type and b.limit_key = k.limit_key
    where l.rate_per_second is not null
      and (_only is null or l.task_type = _only)
      and (_task_types is null or internal.limit_task_type(l.task_type) = any (_task_types))
      and (coalesce(cardinality(_paused), 0) = 0
           or (internal.limit_task_type(l.task_type) <> all (_paused) and l.task_type <> all (_paused)))
    group by l.task_type
    order by 2, 1
    limit 1
$$;
revoke all on function internal.next_limit_token(text[], text[], text) from public;
