-- What a worker whose claim came back short asks: how long, in seconds, until a task of the
-- given types (NULL: all) that a limit holds back may be claimable. NULL when no due task is
-- held back (a paused type's tasks are not: its pause holds them). Under a rate limit: the time
-- until its bucket's next token; when a token is there, a millisecond if it came within the last
-- quarter of the rate's interval (the asking claim reached the bucket just before it: claim
-- again at once, or a burst of 1 loses the time), else a quarter of the interval (another claim
-- is taking it; no worker spins on a token it cannot take). Otherwise 0: running slots hold the
-- tasks, and they free when tasks finish: claim again at the worker's shortest poll interval.
-- A worker's rate claims then wait for the token in the database
-- (queues.claim_limited_tasks_at_token).
create or replace function queues.limit_wait(_task_types text[] default null) returns double precision
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    with held as (
        select l.rate_per_second as rate,
               least(l.burst::double precision,
                     coalesce(b.tokens, l.burst) + l.rate_per_second
                         * greatest(0, extract(epoch from clock_timestamp() - coalesce(b.refilled_at, clock_timestamp())))) as tokens,
               -- Seconds since the bucket held a token (NULL: no claim has taken one yet).
               extract(epoch from clock_timestamp() - b.refilled_at)
                   - greatest(0, 1 - internal.limit_slack(l.rate_per_second) - b.tokens) / l.rate_per_second as token_age
        from queues.task_limit l
        cross join lateral (
            -- Up to 64 of the limit's keys with due tasks, by a skip scan of its index.
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
        where (_task_types is null or internal.limit_task_type(l.task_type) = any (_task_types))
          -- A paused type is held back by its pause, not by its limit: no claim would take it.
          and not exists (select from queues.queue_pause qp
                          where qp.task_type = internal.limit_task_type(l.task_type) or qp.task_type = l.task_type)
    )
    select case when count(*) = 0 then null
                else coalesce(min(case when h.tokens + internal.limit_slack(h.rate) >= 1
                                            then case when h.token_age < 0.25 / h.rate then 0.001 else 0.25 / h.rate end
                                       else (1 - internal.limit_slack(h.rate) - h.tokens) / h.rate end)
                                  filter (where h.rate is not null), 0) end
    from held h
$$;
revoke all on function queues.limit_wait(text[]) from public;
grant execute on function queues.limit_wait(text[]) to worker_service_user;
