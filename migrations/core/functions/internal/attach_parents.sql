-- Makes the task _task_id, just inserted by queues.insert_task, wait for the parents _after
-- (docs/workflows.md): checks them (22023: NULL, more than 10,000, or a task that does not
-- exist), locks them FOR KEY SHARE (which blocks no completion or cancellation, only their
-- deletion until this transaction ends), and counts those that already ended: completed ones
-- at once; failed, dead or cancelled ones cancel the task under 'cancel' and count under 'run'.
-- Parents that have not ended get an edge each and the task waits ('waiting', with its stripe
-- counters); when none is left it stays pending. Sets its workflow_id: the smallest of its
-- parents' (a parent without one gives its own id), and adds it to that workflow's tasks
-- (queues.workflow_task). Returns its status.
create or replace function internal.attach_parents(_task_id bigint, _after bigint[], _on_parent_failure text)
returns queues.task_status
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _ids bigint[];
    _found bigint[];
    _statuses queues.task_status[];
    _missing bigint;
    _open bigint[];
    _failed integer;
    _k integer;
    _stripes integer;
    _workflow bigint;
begin
    select coalesce(array_agg(distinct a order by a), '{}') into _ids from unnest(_after) a;
    select coalesce(array_agg(t.task_id order by t.task_id), '{}'), coalesce(array_agg(t.status order by t.task_id), '{}'),
           min(coalesce(t.workflow_id, t.task_id))
    into _found, _statuses, _workflow
    from (select t.task_id, t.status, t.workflow_id from queues.task t
          where t.task_id = any (_ids)
          order by t.task_id
          for key share) t;
    select a into _missing from unnest(_ids) a where a <> all (_found) order by a limit 1;
    if _missing is not null then
        raise exception 'enqueue: _after names task %, which does not exist', _missing
            using errcode = 'invalid_parameter_value';
    end if;
    insert into queues.workflow_task (workflow_id, task_id) values (_workflow, _task_id);
    _failed := array_position(_statuses, 'failed');
    _failed := coalesce(_failed, array_position(_statuses, 'dead'), array_position(_statuses, 'cancelled'));
    select coalesce(array_agg(f.id order by f.id), '{}') into _open
    from unnest(_found, _statuses) as f(id, status)
    where f.status in ('waiting', 'pending', 'running');

    if _failed is not null and _on_parent_failure = 'cancel' then
        update queues.task t
        set status = 'cancelled', cancelled_at = clock_timestamp(), after_ids = _ids, on_parent_failure = _on_parent_failure,
            workflow_id = _workflow
        where t.task_id = _task_id;
        insert into queues.task_event (task_id, event, from_status, to_status, worker_id, attempt, detail)
        values (_task_id, 'cancelled', 'pending', 'cancelled', session_user, 0,
                format('parent task %s ended %s', _found[_failed], _statuses[_failed]));
        return 'cancelled';
    end if;
    _k := cardinality(_open);
    if _k = 0 then
        update queues.task t set after_ids = _ids, on_parent_failure = _on_parent_failure, workflow_id = _workflow
        where t.task_id = _task_id;
        return 'pending';
    end if;
    -- One parent: its edge is the counter (stripe -1, no task_wait_stripe row); up to 16, one
    -- counter; else ceil(sqrt(k)) stripes of consecutive parents.
    _stripes := case when _k <= 16 then 1 else ceil(sqrt(_k))::integer end;
    update queues.task t
    set status = 'waiting', after_ids = _ids, on_parent_failure = _on_parent_failure, waiting_stripes = _stripes,
        workflow_id = _workflow
    where t.task_id = _task_id;
    if _k > 1 then
        insert into queues.task_wait_stripe (child_id, stripe, pending)
        select _task_id, (o.n - 1) * _stripes / _k, count(*)
        from unnest(_open) with ordinality as o(id, n)
        group by 2;
    end if;
    insert into queues.task_edge (parent_id, child_id, stripe)
    select o.id, _task_id, case when _k = 1 then -1 else (o.n - 1) * _stripes / _k end
    from unnest(_open) with ordinality as o(id, n);
    return 'waiting';
end $$;
revoke all on function internal.attach_parents(bigint, bigint[], text) from public;
