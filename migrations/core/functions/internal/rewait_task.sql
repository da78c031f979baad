-- Makes the task _task_id, retried by hand or restored after its parent's retry (its row locked
-- by the caller), wait again for its parents (docs/workflows.md, "Retrying a node"). Its parents
-- (after_ids) are locked FOR SHARE in id order, so that none ends while they are counted (a
-- parent's completion waits for this transaction; one that ended first is read as ended). Those
-- that have not ended (waiting, pending, running) get an edge each and fresh stripe counters, as
-- at enqueue, and the task is 'waiting'; if none is left it is 'pending', due at once or at its
-- scheduled time. _because is the retried (or restored) parent that brings it back from the
-- cascade's cancellation (NULL for a task retried by hand itself): then, under 'cancel', a
-- parent that ended failed, dead or cancelled keeps it cancelled (as it would cancel a task enqueued now) and nothing is written; a task
-- retried by hand itself counts such a parent as ended (the retry is the operator's decision to
-- run it). A parent deleted since (only ended tasks are deleted) counts as ended. Writes an event
-- when the status changes. Returns the task's status.
create or replace function internal.rewait_task(_task_id bigint, _because bigint, _actor text)
returns queues.task_status
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
    _ids bigint[];
    _statuses queues.task_status[];
    _open bigint[];
    _k integer;
    _stripes integer;
    _to queues.task_status;
begin
    select * into _t from queues.task t where t.task_id = _task_id;
    if not found or _t.after_ids is null then
        return _t.status;
    end if;
    select coalesce(array_agg(p.task_id order by p.task_id), '{}'), coalesce(array_agg(p.status order by p.task_id), '{}')
    into _ids, _statuses
    from (select t.task_id, t.status from queues.task t
          where t.task_id = any (_t.after_ids)
          order by t.task_id
          for share) p;
    if _because is not null and _t.on_parent_failure = 'cancel'
       and '{failed,dead,cancelled}'::queues.task_status[] && _statuses then
        return _t.status;
    end if;
    select coalesce(array_agg(f.id order by f.id), '{}') into _open
    from unnest(_ids, _statuses) as f(id, status)
    where f.status in ('waiting', 'pending', 'running');
    _k := cardinality(_open);
    -- Counters and edges left from before (a cancelled task keeps them) are rebuilt.
    delete from queues.task_wait_stripe w where w.child_id = _task_id;
    delete from queues.task_edge e where e.child_id = _task_id;
    if _k = 0 then
        _to := 'pending';
        update queues.task t
        set status = 'pending', waiting_stripes = null,
            run_at = case when _t.status = 'pending' then t.run_at else greatest(t.scheduled_at, clock_timestamp()) end
        where t.task_id = _task_id;
    else
        _to := 'waiting';
        _stripes := case when _k <= 16 then 1 else ceil(sqrt(_k))::integer end;
        update queues.task t set status = 'waiting', waiting_stripes = _stripes where t.task_id = _task_id;
        if _k > 1 then
            insert into queues.task_wait_stripe (child_id, stripe, pending)
            select _task_id, (o.n - 1) * _stripes / _k, count(*)
            from unnest(_open) with ordinality as o(id, n)
            group by 2;
        end if;
        insert into queues.task_edge (parent_id, child_id, stripe)
        select o.id, _task_id, case when _k = 1 then -1 else (o.n - 1) * _stripes / _k end
        from unnest(_open) with ordinality as o(id, n);
    end if;
    if _to <> _t.status then
        insert into queues.task_event (task_id, event, from_status, to_status, worker_id, attempt, detail, actor)
        values (_task_id, case when _because is null then 'waiting' else 'retried' end, _t.status, _to, session_user, _t.attempt,
                case when _because is null
                     then format('waits for %s parent(s) that have not ended', _k)
                     else format('waits again: parent task %s was retried by hand', _because) end,
                _actor);
    end if;
    return _to;
end $$;
revoke all on function internal.rewait_task(bigint, bigint, text) from public;
