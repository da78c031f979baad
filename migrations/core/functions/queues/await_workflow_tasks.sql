-- A durable Go workflow's wait for tasks _ids at position _seq, named _name, under the task's
-- lease (docs/workflows.md, "Waiting for tasks"). The tasks waited for are locked FOR SHARE in id
-- order, so that none ends while they are counted. In one transaction:
--   done:       every one has ended (completed, failed, dead or cancelled): their statuses are
--               recorded at _seq and returned, in id order;
--   waiting:    some have not: the workflow's task waits for them as a task enqueued after them
--               does, under the policy 'run' (a failed one releases it too: the workflow reads
--               the statuses), with its lease given up and its attempt not spent
--               (internal.rewait_task: an edge and counters per task not ended); the end of the
--               last one makes it pending in its own transaction, and the run after it gets done;
--   lease_lost: the lease is not the task's current one: nothing written.
-- Refused with 22023, nothing written: NULL, empty or over 10,000 ids, the workflow's own id, an
-- id no task has.
create or replace function queues.await_workflow_tasks(_task_id bigint, _lease_id bigint, _seq integer, _name text, _ids bigint[])
returns table (outcome text, statuses jsonb)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _set bigint[];
    _found bigint[];
    _st queues.task_status[];
    _missing bigint;
    _snapshot jsonb;
    _recorded boolean;
begin
    if _ids is null or cardinality(_ids) = 0 or cardinality(_ids) > 10000 or array_position(_ids, null) is not null then
        raise exception 'await_workflow_tasks: _ids must name 1 to 10,000 tasks, without NULL'
            using errcode = 'invalid_parameter_value';
    end if;
    select array_agg(distinct i order by i) into _set from unnest(_ids) i;
    if _task_id = any (_set) then
        raise exception 'await_workflow_tasks: a workflow cannot wait for its own task %', _task_id
            using errcode = 'invalid_parameter_value';
    end if;
    perform 1 from queues.task t
    where t.task_id = _task_id and t.lease_id = _lease_id and t.lease_expires_at is not null -- i.e. running
    for no key update;
    if not found then
        return query select 'lease_lost', null::jsonb;
        return;
    end if;
    select coalesce(array_agg(p.task_id order by p.task_id), '{}'), coalesce(array_agg(p.status order by p.task_id), '{}')
    into _found, _st
    from (select t.task_id, t.status from queues.task t where t.task_id = any (_set) order by t.task_id for share) p;
    select i into _missing from unnest(_set) i where i <> all (_found) order by i limit 1;
    if _missing is not null then
        raise exception 'await_workflow_tasks: task % does not exist', _missing using errcode = 'invalid_parameter_value';
    end if;
    if not ('{waiting,pending,running}'::queues.task_status[] && _st) then
        select jsonb_agg(jsonb_build_object('task_id', f.id, 'status', f.status) order by f.id) into _snapshot
        from unnest(_found, _st) as f(id, status);
        select r.recorded into _recorded
        from queues.record_workflow_step(_task_id, _lease_id, _seq, 'await', _name, jsonb_build_object('tasks', _snapshot)) r;
        return query select case when _recorded then 'done' else 'lease_lost' end, _snapshot;
        return;
    end if;
    with w as (
        update queues.task t
        set status = 'waiting', after_ids = _set, on_parent_failure = 'run', lease_expires_at = null,
            attempt = greatest(t.attempt - 1, 0)
        where t.task_id = _task_id
        returning t.attempt
    )
    insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
    select _task_id, 'waiting', 'running', 'waiting', _lease_id, session_user, w.attempt + 1,
           format('await %s: waits for %s task(s) that have not ended', quote_literal(_name),
                  (select count(*) from unnest(_st) s where s in ('waiting', 'pending', 'running')))
    from w;
    perform internal.rewait_task(_task_id, null, null); -- its edges and counters
    return query select 'waiting', null::jsonb;
end $$;
revoke all on function queues.await_workflow_tasks(bigint, bigint, integer, text, bigint[]) from public;
grant execute on function queues.await_workflow_tasks(bigint, bigint, integer, text, bigint[]) to worker_service_user;
comment on function queues.await_workflow_tasks(bigint, bigint, integer, text, bigint[]) is
    'A durable Go workflow''s wait for tasks under its lease: done (their statuses recorded), waiting (the workflow''s task waits for them, policy run, attempt not spent) or lease_lost.';
