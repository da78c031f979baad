-- A durable Go workflow's spawn at position _seq, named _name, under the task's lease
-- (docs/workflows.md, "Enqueueing tasks once"): enqueues a task of Go type _task_type and records
-- its id as the checkpoint, in one transaction, so the task is enqueued once however often the
-- workflow's code runs again. Only Go task types: a type that names a function (db_function, the
-- channels) is refused with 22023, so the worker role, which runs this, names no function through
-- it. Returns spawned and the task's id, or lease_lost (nothing written).
create or replace function queues.spawn_workflow_task(
    _task_id bigint, _lease_id bigint, _seq integer, _name text,
    _task_type text, _payload jsonb, _scheduled_at timestamptz default null, _priority integer default 0,
    _max_attempts integer default null)
returns table (outcome text, spawned_task_id bigint)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _child bigint;
    _recorded boolean;
begin
    if _task_type in ('db_function', 'email', 'sms', 'file_delete') then
        raise exception 'spawn_workflow_task: task type % names a function; a workflow spawns tasks of Go types (start a process with its kickoff, in a StepTx)', _task_type
            using errcode = 'invalid_parameter_value';
    end if;
    perform 1 from queues.task t
    where t.task_id = _task_id and t.lease_id = _lease_id and t.lease_expires_at is not null -- i.e. running
    for no key update;
    if not found then
        return query select 'lease_lost', null::bigint;
        return;
    end if;
    select r.task_id into _child
    from queues.insert_task(_task_type, _payload, coalesce(_scheduled_at, now()), coalesce(_priority, 0), null, _max_attempts) r;
    select r.recorded into _recorded
    from queues.record_workflow_step(_task_id, _lease_id, _seq, 'spawn', _name,
                                     jsonb_build_object('task_id', _child, 'task_type', _task_type)) r;
    if not _recorded then
        raise exception 'spawn_workflow_task: position % of task % holds a checkpoint already', _seq, _task_id
            using errcode = 'unique_violation';
    end if;
    return query select 'spawned', _child;
end $$;
revoke all on function queues.spawn_workflow_task(bigint, bigint, integer, text, text, jsonb, timestamptz, integer, integer) from public;
grant execute on function queues.spawn_workflow_task(bigint, bigint, integer, text, text, jsonb, timestamptz, integer, integer) to worker_service_user;
comment on function queues.spawn_workflow_task(bigint, bigint, integer, text, text, jsonb, timestamptz, integer, integer) is
    'A durable Go workflow''s spawn under the task''s lease: enqueues a task of a Go type and records its id as the checkpoint in one transaction (spawned), or lease_lost.';
