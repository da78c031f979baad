-- A durable Go workflow's checkpoints, in call order (docs/workflows.md, "Durable workflows in
-- Go"): what its run reads first, to return the calls already completed without running them.
create or replace function queues.workflow_steps(_task_id bigint)
returns table (seq integer, kind text, name text, result jsonb, wake_at timestamptz)
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select s.seq, s.kind, s.name, s.result, s.wake_at
    from queues.workflow_step s
    where s.task_id = _task_id
    order by s.seq
$$;
revoke all on function queues.workflow_steps(bigint) from public;
grant execute on function queues.workflow_steps(bigint) to worker_service_user;
comment on function queues.workflow_steps(bigint) is
    'A durable Go workflow''s checkpoints in call order: position, kind, name, result and a sleep''s wake time.';
