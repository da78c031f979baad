-- The claim's unlimited candidates while limits exist (queues.claim_tasks): up to _limit pending,
-- due tasks that no limit governs (limit_name NULL, and their type, not in _limited, has no limit
-- either), of _task_types when given, none of a paused type, in claim order, locked (SKIP LOCKED).
--
-- The claim index puts these first ((limit_name is null) desc), so an ordered scan of it stops
-- where the tasks of limited types begin, however many of those wait. The planner is told so
-- (enable_seqscan and enable_bitmapscan off, for this statement alone): with a backlog of limited
-- tasks it guessed that no unlimited task is due and read the whole table instead, 27 ms a claim
-- with 50,000 limited tasks pending. A limited enqueue leaves a dead entry among the unlimited
-- ones until VACUUM (its row is inserted, then given its limit); an index scan marks it dead as it
-- passes, and later scans skip it.
create or replace function internal.unlimited_claimable(_limited text[], _task_types text[], _paused text[], _limit integer)
returns bigint[]
language sql volatile security definer
set search_path = pg_catalog, pg_temp set enable_seqscan = off set enable_bitmapscan = off as $$
    select array(
        select t.task_id
        from queues.task t
        where t.status = 'pending'
          and t.run_at <= now()
          and t.limit_name is null
          and t.task_type <> all (_limited)
          and (_task_types is null or t.task_type = any (_task_types))
          and (coalesce(cardinality(_paused), 0) = 0 or t.task_type <> all (_paused))
        order by t.priority desc, t.run_at, t.task_id
        limit _limit
        for update skip locked)
$$;
revoke all on function internal.unlimited_claimable(text[], text[], text[], integer) from public;
