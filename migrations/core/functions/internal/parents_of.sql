-- What naming the parents _after does to a task about to be enqueued (docs/workflows.md), read
-- before its row is written so that the row is written once: checks them (22023: a task that
-- does not exist; the input's other rules are internal.check_parents_input's), locks them FOR
-- KEY SHARE (which blocks no completion or cancellation, only their deletion until this
-- transaction ends), and returns:
--   ids            the parents, distinct, in id order (the task's after_ids);
--   open           those that have not ended (waiting, pending, running): one edge each;
--   workflow       the smallest of their workflow ids (a parent without one gives its own id);
--   status         'cancelled' when one ended failed, dead or cancelled under 'cancel';
--                  'waiting' when some have not ended; else 'pending' (the ended ones count:
--                  completed ones at once, failed ones under 'run');
--   stripes        the waiting task's counters: 1 up to 16 open parents, else ceil(sqrt(k));
--                  NULL unless waiting;
--   failed_parent, failed_status   the parent that cancels it, and how that parent ended.
-- internal.attach_children then writes the edges, counters, event and workflow row.
create or replace function internal.parents_of(
    _after bigint[], _on_parent_failure text,
    out ids bigint[], out open bigint[], out workflow bigint, out status queues.task_status,
    out stripes integer, out failed_parent bigint, out failed_status queues.task_status)
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _found bigint[];
    _statuses queues.task_status[];
    _missing bigint;
    _failed integer;
begin
    select coalesce(array_agg(distinct a order by a), '{}') into ids from unnest(_after) a;
    select coalesce(array_agg(t.task_id order by t.task_id), '{}'), coalesce(array_agg(t.status order by t.task_id), '{}'),
           min(coalesce(t.workflow_id, t.task_id))
    into _found, _statuses, workflow
    from (select t.task_id, t.status, t.workflow_id from queues.task t
          where t.task_id = any (ids)
          order by t.task_id
          for key share) t;
    select a into _missing from unnest(ids) a where a <> all (_found) order by a limit 1;
    if _missing is not null then
        raise exception 'enqueue: _after names task %, which does not exist', _missing
            using errcode = 'invalid_parameter_value';
    end if;
    _failed := coalesce(array_position(_statuses, 'failed'), array_position(_statuses, 'dead'),
                        array_position(_statuses, 'cancelled'));
    if _failed is not null and _on_parent_failure = 'cancel' then
        status := 'cancelled';
        failed_parent := _found[_failed];
        failed_status := _statuses[_failed];
        open := '{}';
        return;
    end if;
    select coalesce(array_agg(f.id order by f.id), '{}') into open
    from unnest(_found, _statuses) as f(id, status)
    where f.status in ('waiting', 'pending', 'running');
    if cardinality(open) = 0 then
        status := 'pending';
        return;
    end if;
    status := 'waiting';
    -- One parent: its edge is the counter (stripe -1, no task_wait_stripe row); up to 16, one
    -- counter; else ceil(sqrt(k)) stripes of consecutive parents.
    stripes := case when cardinality(open) <= 16 then 1 else ceil(sqrt(cardinality(open)))::integer end;
end $$;
revoke all on function internal.parents_of(bigint[], text) from public;
