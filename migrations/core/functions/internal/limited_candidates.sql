-- Chooses and locks up to _want pending, due tasks of the limited types _types (NULL: every
-- limited type) that their limits let run now; with _only_ids, only among those tasks. For each
-- limit it can lock (a limit another claim holds is skipped this round: that claim serves it),
-- each bucket (key) gets at most its free running slots and its whole tokens. A claim looks at no
-- more than max(4 × _want, 64) keys, starting after the furthest key the previous claim took from,
-- and wrapping around. The candidates rotate across buckets, fewest running first: a task's rank
-- is its bucket's running tasks plus its place in the bucket, and lower ranks come first, so an
-- idle key's first task goes before a busy key's next one, and one key's backlog cannot starve the
-- others; among equal ranks, keys come in order from the cursor, so that successive claims rotate
-- through the keys even when every task finishes between two claims (priority and age order the
-- tasks within a key). Tokens are not taken here: see internal.take_limit_tokens, called with what
-- the claim finally leases.
create or replace function internal.limited_candidates(_types text[], _want integer, _only_ids bigint[], _clock timestamptz)
returns setof bigint
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _l queues.task_limit;
    _ids bigint[] := '{}';
    _ranks bigint[] := '{}';
    _got bigint[];
    _got_ranks bigint[];
    _window integer;
    _cursor text;
    _last text;
    _busy jsonb;
    _stop integer;
begin
    for _l in
        select * from queues.task_limit l
        where _types is null or l.task_type = any (_types)
        order by l.task_type
        for update skip locked
    loop
        -- The keys to look at: at most _window of them, in key order from the limit's cursor,
        -- wrapping around (a claim by id looks at the keys of its tasks). Bounding the window
        -- bounds a claim's cost however many keys have tasks; moving the cursor past the keys
        -- looked at makes successive claims rotate through all of them.
        _window := case when _only_ids is not null then cardinality(_only_ids) else greatest(4 * _want, 64) end;
        _cursor := case when _only_ids is null then _l.key_cursor end;
        -- The running tasks of each busy key, looked up by key as the window is read.
        _busy := coalesce((select jsonb_object_agg(r.k, r.n) from (
                               select t.limit_key as k, count(*) as n
                               from queues.task t
                               where t.limit_name = _l.task_type and t.status = 'running'
                               group by t.limit_key) r), '{}');
        -- The window ends early once it holds _want idle keys with a due first task: each of
        -- those has a task of rank 1, the lowest there is, so no key further on could be picked
        -- before them (without a rate: a key with no running task has a free slot). A claim then
        -- reads about as many keys as it takes tasks, however many keys have tasks.
        _stop := case when _only_ids is null and _l.rate_per_second is null then _want end;
        with recursive after_cursor(k, head, due, n, idle) as (
            -- Each step finds the next key and, in the same probe of the index, its first task
            -- in claim order (head), which is all a key with one free slot needs.
            (select t.limit_key, t.task_id, t.run_at <= now(), 1,
                    case when t.run_at <= now() and not _busy ? t.limit_key then 1 else 0 end
             from queues.task t
             where t.limit_name = _l.task_type and t.status = 'pending'
               and (_cursor is null or t.limit_key > _cursor)
               and (_only_ids is null or t.task_id = any (_only_ids))
             order by t.limit_key, t.priority desc, t.run_at, t.task_id limit 1)
            union all
            select h.limit_key, h.task_id, h.due, a.n + 1,
                   a.idle + case when h.due and not _busy ? h.limit_key then 1 else 0 end
            from after_cursor a
            cross join lateral (
                select t.limit_key, t.task_id, t.run_at <= now() as due
                from queues.task t
                where t.limit_name = _l.task_type and t.status = 'pending' and t.limit_key > a.k
                  and (_only_ids is null or t.task_id = any (_only_ids))
                order by t.limit_key, t.priority desc, t.run_at, t.task_id limit 1) h
            where a.n < _window and (_stop is null or a.idle < _stop)
        ), after_idle(idle) as (
            select coalesce(max(a.idle), 0) from after_cursor a
        ), before_cursor(k, head, due, n, idle) as (
            (select t.limit_key, t.task_id, t.run_at <= now(), 1,
                    (select i.idle from after_idle i)
                        + case when t.run_at <= now() and not _busy ? t.limit_key then 1 else 0 end
             from queues.task t
             where _cursor is not null
               and (_stop is null or (select i.idle from after_idle i) < _stop)
               and t.limit_name = _l.task_type and t.status = 'pending' and t.limit_key <= _cursor
             order by t.limit_key, t.priority desc, t.run_at, t.task_id limit 1)
            union all
            select h.limit_key, h.task_id, h.due, b.n + 1,
                   b.idle + case when h.due and not _busy ? h.limit_key then 1 else 0 end
            from before_cursor b
            cross join lateral (
                select t.limit_key, t.task_id, t.run_at <= now() as due
                from queues.task t
                where t.limit_name = _l.task_type and t.status = 'pending' and t.limit_key > b.k and t.limit_key <= _cursor
                order by t.limit_key, t.priority desc, t.run_at, t.task_id limit 1) h
            where b.n < _window and (_stop is null or b.idle < _stop)
        ), keys(k, head, due, ord) as (
            select a.k, a.head, a.due, a.n from after_cursor a
            union all
            select b.k, b.head, b.due, _window + b.n from before_cursor b
            where b.n <= _window - (select count(*) from after_cursor a)
        ), room as (
            select keys.k, keys.head, keys.due, keys.ord, r.n as busy,
                   least(_want::bigint,
                         coalesce(_l.max_running - r.n, _want),
                         case when _l.rate_per_second is null then _want
                              else floor(least(_l.burst::double precision,
                                               coalesce(b.tokens, _l.burst) + _l.rate_per_second
                                                   * greatest(0, extract(epoch from _clock - coalesce(b.refilled_at, _clock))))
                                         + internal.limit_slack(_l.rate_per_second))::bigint end) as n
            from keys
            cross join lateral (select coalesce((_busy ->> keys.k)::bigint, 0) as n) r
            left join queues.limit_bucket b on b.task_type = _l.task_type and b.limit_key = keys.k
        )
        , candidates as (
            -- A key with one slot (or token) free takes its head; one with more, or whose head
            -- is not due yet, reads its tasks.
            select room.head as task_id, room.busy + 1 as rank, 1::bigint as rn, room.ord, room.k
            from room
            where room.n = 1 and room.due
            union all
            select c.task_id, c.rank, c.rn, room.ord, room.k
            from room
            cross join lateral (
                select t.task_id, t.rn, room.busy + t.rn as rank
                from (select t.task_id, t.priority, t.run_at,
                             row_number() over (order by t.priority desc, t.run_at, t.task_id) as rn
                      from queues.task t
                      where t.limit_name = _l.task_type and t.limit_key = room.k and t.status = 'pending'
                        and t.run_at <= now()
                        and (_only_ids is null or t.task_id = any (_only_ids))
                      order by t.priority desc, t.run_at, t.task_id
                      limit room.n) t
            ) c
            where room.n > 1 or (room.n = 1 and not room.due)
        ), picked as (
            -- Fewest running first; among equals, keys in order from the cursor, so that
            -- successive claims rotate through the keys; within a key, priority then age.
            select * from candidates order by rank, ord, rn limit _want
        )
        select array_agg(p.task_id order by p.rank, p.ord, p.rn),
               array_agg(p.rank order by p.rank, p.ord, p.rn),
               (select p2.k from picked p2 order by p2.ord desc limit 1)
        into _got, _got_ranks, _last
        from picked p;

        if _got is not null then
            _ids := _ids || _got;
            _ranks := _ranks || _got_ranks;
        end if;
        -- The next claim starts after the furthest key this one took from.
        if _only_ids is null and _l.key_field is not null and _last is not null and _last is distinct from _l.key_cursor then
            update queues.task_limit set key_cursor = _last where task_type = _l.task_type;
        end if;
    end loop;

    if cardinality(_ids) = 0 then
        return;
    end if;
    -- Across limits as within one: lowest rank first, then in each limit's order. The tasks are
    -- read by id (t.task_id = any): joined to the candidates alone, a claim of about 1,000 was
    -- planned as a hash join over a sequential scan of queues.task.
    return query
    select t.task_id
    from queues.task t
    join unnest(_ids, _ranks) with ordinality as c(task_id, rank, pos) on c.task_id = t.task_id
    where t.task_id = any (_ids) and t.status = 'pending'
    order by c.rank, c.pos
    limit _want
    for update of t skip locked;
end $$;
revoke all on function internal.limited_candidates(text[], integer, bigint[], timestamp with time zone) from public;
