-- Completes tasks under their leases, each with its result (or none): the one completion body.
-- Returns each task with what became of it; a stale lease's completion is refused and recorded in
-- queues.error.
create or replace function queues.complete_tasks_with_results(_task_ids bigint[], _lease_ids bigint[], _results jsonb[])
returns table (task_id bigint, status text)
language plpgsql security definer set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan as $$
#variable_conflict use_column
declare
    _n integer := coalesce(cardinality(_task_ids), 0);
    _done bigint[];
    _skip bigint[] := '{}';
    _big record;
    _s queues.task_status;
begin
    if coalesce(cardinality(_lease_ids), 0) <> _n or (_results is not null and cardinality(_results) <> _n) then
        raise exception 'complete_tasks_with_results: % task ids, % lease ids and % results; expected one of each per task',
            _n, coalesce(cardinality(_lease_ids), 0), coalesce(cardinality(_results), 0)
            using errcode = 'invalid_parameter_value';
    end if;

    if _results is not null then
        -- Results over the bound: the task fails, without retry, and is not completed.
        for _big in
            select c.task_id, c.lease_id, pg_column_size(c.result) as bytes
            from unnest(_task_ids, _lease_ids, _results) as c(task_id, lease_id, result)
            where pg_column_size(c.result) > internal.max_payload_bytes()
            order by c.task_id
        loop
            _skip := _skip || _big.task_id;
            _s := queues.fail_task(_big.task_id,
                format('the task''s result is %s bytes, over the database''s limit of %s bytes (8 MiB) per task; the task is failed, its result not stored',
                       _big.bytes, internal.max_payload_bytes()),
                _big.lease_id, false,
                jsonb_build_object('reason', 'result_too_large', 'result_bytes', _big.bytes));
            if _s is not null then
                return query select _big.task_id, _s::text;
            end if;
        end loop;
    end if;

    -- Lock first, in task_id order (so a renewal of the same tasks cannot deadlock with it), then
    -- complete what is still running under the given lease.
    with c as (
        select u.task_id, u.lease_id, u.result
        from unnest(_task_ids, _lease_ids, coalesce(_results, array_fill(null::jsonb, array[_n])))
             as u(task_id, lease_id, result)
        where u.task_id <> all (_skip)
    ), held as (
        select t.task_id, c.result
        from queues.task t
        join c on t.task_id = c.task_id and t.lease_id = c.lease_id
        where t.lease_expires_at is not null  -- i.e. running
        order by t.task_id
        for no key update of t
    ), done as (
        update queues.task t
        set status = 'completed', completed_at = clock_timestamp(), lease_expires_at = null, result = h.result
        from held h
        where t.task_id = h.task_id
        returning t.task_id
    )
    select coalesce(array_agg(d.task_id), '{}') into _done from done d;

    -- The tasks waiting for these count them as completed, in this transaction (docs/workflows.md):
    -- one probe when none has children, an index lookup per task until one has (not a filter of
    -- = any (_done), which the planner may run over every edge). A statement of its own, so that
    -- its snapshot sees an edge committed while the update above waited for a parent's row.
    if _done <> '{}' and exists (select from unnest(_done) as d(id)
                                 cross join lateral (select from queues.task_edge e where e.parent_id = d.id limit 1) e) then
        perform internal.resolve_parents(_done, array_fill('completed'::queues.task_status, array[cardinality(_done)]));
    end if;

    return query select d, 'completed' from unnest(_done) as d;
    if cardinality(_done) + cardinality(_skip) = _n then
        return;
    end if;

    -- Repeats under the lease that completed the task count as done (the result of the first
    -- completion stands).
    return query
    select c.task_id, 'completed'
    from unnest(_task_ids, _lease_ids) as c(task_id, lease_id)
    join queues.task t on t.task_id = c.task_id
    where c.task_id <> all (_done) and c.task_id <> all (_skip) and t.status = 'completed' and t.lease_id = c.lease_id;

    insert into queues.error (task_id, error_message, context)
    select c.task_id,
           case when t.task_id is null then format('completion refused: task %s does not exist', c.task_id)
                else format('completion refused: lease %s is not the current lease of task %s (current lease %s, status %s)',
                            coalesce(c.lease_id::text, 'NULL'), c.task_id, t.lease_id, t.status) end,
           jsonb_build_object('operation', 'complete', 'lease_id', c.lease_id,
                              'current_lease_id', t.lease_id, 'status', t.status)
    from unnest(_task_ids, _lease_ids) as c(task_id, lease_id)
    left join queues.task t on t.task_id = c.task_id
    where c.task_id <> all (_done) and c.task_id <> all (_skip)
      and not coalesce(t.status = 'completed' and t.lease_id = c.lease_id, false);
end $$;
revoke all on function queues.complete_tasks_with_results(bigint[], bigint[], jsonb[]) from public;
grant execute on function queues.complete_tasks_with_results(bigint[], bigint[], jsonb[]) to worker_service_user;
