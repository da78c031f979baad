-- The first _n pending, due tasks in claim order that the unlimited claim would take
-- (internal.unlimited_claimable's tasks, not locked), for the dispatcher's window
-- (queues.dispatch_tasks): read one priority at a time, each scan of the claim index stopping at
-- its first task not due, so tasks due later (durable workflows asleep, tasks scheduled for next
-- month) are not read, however many wait (docs/limits.md, "What the claim does").
create or replace function internal.due_window(_limited text[], _task_types text[], _paused text[], _n integer)
returns bigint[]
language plpgsql stable security definer
set search_path = pg_catalog, pg_temp set enable_seqscan = off set enable_bitmapscan = off as $$
declare
    _ids bigint[] := '{}';
    _priority integer;
    _unlimited boolean;
begin
    foreach _unlimited in array case when coalesce(cardinality(_limited), 0) = 0 then array[true, false] else array[true] end loop
        select t.priority into _priority
        from queues.task t
        where t.status = 'pending' and (t.limit_name is null) = _unlimited
        order by (t.limit_name is null) desc, t.priority desc
        limit 1;
        while _priority is not null and cardinality(_ids) < _n loop
            _ids := _ids || array(
                select t.task_id
                from queues.task t
                where t.status = 'pending'
                  and (t.limit_name is null) = _unlimited
                  and t.priority = _priority
                  and t.run_at <= now()
                  and (coalesce(cardinality(_limited), 0) = 0 or t.task_type <> all (_limited))
                  and (_task_types is null or t.task_type = any (_task_types))
                  and (coalesce(cardinality(_paused), 0) = 0
                       or (t.task_type <> all (_paused) and (t.key_scope = '' or t.task_type || ':' || t.key_scope <> all (_paused))))
                order by (t.limit_name is null) desc, t.priority desc, t.run_at, t.task_id
                limit _n - cardinality(_ids));
            exit when cardinality(_ids) >= _n;
            select t.priority into _priority
            from queues.task t
            where t.status = 'pending' and (t.limit_name is null) = _unlimited and t.priority < _priority
            order by (t.limit_name is null) desc, t.priority desc
            limit 1;
        end loop;
        exit when cardinality(_ids) >= _n;
    end loop;
    return _ids;
end $$;
revoke all on function internal.due_window(text[], text[], text[], integer) from public;
