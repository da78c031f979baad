-- The claim's unlimited candidates (queues.claim_tasks): up to _limit pending, due tasks that no
-- limit governs (limit_name NULL, and their type, not in _limited, has no limit either; without
-- any limit, every pending task), of _task_types when given, none of a paused type, in claim
-- order, locked (SKIP LOCKED).
--
-- The claim index puts these first ((limit_name is null) desc), so a scan of it stops where the
-- tasks of limited types begin, however many of those wait. Within them it reads one priority at
-- a time: the tasks of a priority are in run_at order, so the scan of one stops at its first task
-- not yet due, and the next priority is found by one descent of the index (priority < the last
-- one). A single ordered scan filtered by run_at read past every task due later (a durable
-- workflow asleep, a task scheduled for next month) whenever fewer than _limit were due, which is
-- every claim of an idle worker: 12 ms a claim with 100,000 of them (docs/benchmarks.md, "Durable
-- workflows asleep"). The planner is told to use the index (enable_seqscan and enable_bitmapscan
-- off, for this function alone): with a backlog of limited tasks it guessed that no unlimited task
-- is due and read the whole table instead. A limited enqueue leaves a dead entry among the
-- unlimited ones until VACUUM (its row is inserted, then given its limit); an index scan marks it
-- dead as it passes, and later scans skip it.
create or replace function internal.unlimited_claimable(_limited text[], _task_types text[], _paused text[], _limit integer)
returns bigint[]
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp set enable_seqscan = off set enable_bitmapscan = off as $$
declare
    _ids bigint[] := '{}';
    _priority integer;
    _unlimited boolean;
begin
    -- Without limits, the tasks that still name one (a limit removed while they waited) come
    -- after the others, as the index orders them; with limits, limited_candidates takes those.
    foreach _unlimited in array case when coalesce(cardinality(_limited), 0) = 0 then array[true, false] else array[true] end loop
        select t.priority into _priority
        from queues.task t
        where t.status = 'pending' and (t.limit_name is null) = _unlimited
        order by (t.limit_name is null) desc, t.priority desc
        limit 1;
        while _priority is not null and cardinality(_ids) < _limit loop
            _ids := _ids || array(
                select t.task_id
                from queues.task t
                where t.status = 'pending'
                  and (t.limit_name is null) = _unlimited
                  and t.priority = _priority
                  and t.run_at <= now()
                  and (coalesce(cardinality(_limited), 0) = 0 or t.task_type <> all (_limited))
                  and (_task_types is null or t.task_type = any (_task_types))
                  and (coalesce(cardinality(_paused), 0) = 0 or (t.task_type <> all (_paused) and (t.key_scope = '' or t.task_type || ':' || t.key_scope <> all (_paused))))
                order by (t.limit_name is null) desc, t.priority desc, t.run_at, t.task_id
                limit _limit - cardinality(_ids)
                for update skip locked);
            exit when cardinality(_ids) >= _limit;
            select t.priority into _priority
            from queues.task t
            where t.status = 'pending' and (t.limit_name is null) = _unlimited and t.priority < _priority
            order by (t.limit_name is null) desc, t.priority desc
            limit 1;
        end loop;
        exit when cardinality(_ids) >= _limit;
    end loop;
    return _ids;
end $$;
revoke all on function internal.unlimited_claimable(text[], text[], text[], integer) from public;
