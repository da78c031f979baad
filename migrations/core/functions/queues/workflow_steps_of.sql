-- Many durable Go workflows' checkpoints, in call order per task (docs/workflows.md, "Durable
-- workflows in Go"): what a worker reads for the workflows it starts at the same time, in one
-- statement, with the database's clock. queues.workflow_steps reads one workflow's.
create or replace function queues.workflow_steps_of(_task_ids bigint[])
returns table (task_id bigint, seq integer, kind text, name text, result jsonb, wake_at timestamptz, read_at timestamptz)
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
begin
    if coalesce(cardinality(_task_ids), 0) not between 1 and 10000 then
        raise exception 'workflow_steps_of: _task_ids must hold 1 to 10000 task ids, got %', coalesce(cardinality(_task_ids), 0)
            using errcode = 'invalid_parameter_value';
    end if;
    return query
    select s.task_id, s.seq, s.kind, s.name, s.result, s.wake_at, clock_timestamp()
    from queues.workflow_step s
    where s.task_id = any (_task_ids)
    order by s.task_id, s.seq;
end $$;
revoke all on function queues.workflow_steps_of(bigint[]) from public;
grant execute on function queues.workflow_steps_of(bigint[]) to worker_service_user;
comment on function queues.workflow_steps_of(bigint[]) is
    'Many durable Go workflows'' checkpoints in call order per task: position, kind, name, result and a sleep''s wake time, with the database''s clock.';
