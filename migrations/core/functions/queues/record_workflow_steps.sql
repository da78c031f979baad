-- Records many durable Go workflows' step checkpoints in one statement, each under its task's
-- lease (docs/workflows.md, "Durable workflows in Go"): a worker groups the checkpoints its
-- running workflows' Steps finish at the same time, as it groups their completions. Each row is
-- (task, lease, position, name, result, start) of a plain step (kind 'step'); a transactional
-- step and the other calls go through queues.record_workflow_step. Returns, for each input row,
-- recorded: false when the lease is not the task's current one or the position holds a
-- checkpoint already (nothing written for that row). The task rows are locked in id order.
create or replace function queues.record_workflow_steps(
    _task_ids bigint[], _lease_ids bigint[], _seqs integer[], _names text[], _results jsonb[],
    _started_ats timestamptz[])
returns table (task_id bigint, seq integer, recorded boolean)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _n integer := coalesce(cardinality(_task_ids), 0);
begin
    if _n = 0 or _n > 10000 then
        raise exception 'record_workflow_steps: _task_ids must hold 1 to 10000 checkpoints, got %', _n
            using errcode = 'invalid_parameter_value';
    end if;
    if coalesce(cardinality(_lease_ids), -1) <> _n or coalesce(cardinality(_seqs), -1) <> _n
       or coalesce(cardinality(_names), -1) <> _n or coalesce(cardinality(_results), -1) <> _n
       or coalesce(cardinality(_started_ats), -1) <> _n then
        raise exception 'record_workflow_steps: _lease_ids, _seqs, _names, _results and _started_ats must each hold % elements, as _task_ids does', _n
            using errcode = 'invalid_parameter_value';
    end if;
    if exists (select from unnest(_task_ids, _lease_ids) as i(t, l) where t is null or l is null) then
        raise exception 'record_workflow_steps: _task_ids and _lease_ids must not hold NULL'
            using errcode = 'invalid_parameter_value';
    end if;
    if exists (select from unnest(_seqs) as s where s is null or s not between 1 and 100000) then
        raise exception 'record_workflow_steps: each of _seqs must be between 1 and 100000'
            using errcode = 'invalid_parameter_value';
    end if;
    if exists (select from unnest(_names) as m where m is null or m = '' or length(m) > 200) then
        raise exception 'record_workflow_steps: each of _names must be 1 to 200 characters'
            using errcode = 'invalid_parameter_value';
    end if;
    return query
    with held as (
        select t.task_id, t.lease_id, t.attempt
        from queues.task t
        where t.task_id = any (_task_ids) and t.lease_expires_at is not null -- i.e. running
        order by t.task_id
        for key share of t
    ), input as (
        -- Of the rows for one position, the first under the current lease is the one written: a
        -- stale run's row for the same position (a run that lost its lease, finishing the same
        -- step beside the run that took the task over) must not take its place.
        select i.task_id, i.lease_id, i.seq, i.name, i.result, i.started_at, i.ord, h.attempt,
            h.task_id is not null as current,
            row_number() over (partition by i.task_id, i.seq order by (h.task_id is not null) desc, i.ord) = 1 as first
        from unnest(_task_ids, _lease_ids, _seqs, _names, _results, _started_ats)
            with ordinality as i(task_id, lease_id, seq, name, result, started_at, ord)
        left join held h on h.task_id = i.task_id and h.lease_id = i.lease_id
    ), ins as (
        insert into queues.workflow_step (task_id, seq, kind, name, result, wake_at, lease_id, attempt, started_at)
        select i.task_id, i.seq, 'step', i.name, i.result, null, i.lease_id, i.attempt, i.started_at
        from input i
        where i.first and i.current
        on conflict on constraint workflow_step_pkey do nothing
        returning workflow_step.task_id, workflow_step.seq, workflow_step.lease_id
    )
    select i.task_id, i.seq, i.first and ins.task_id is not null
    from input i
    left join ins on ins.task_id = i.task_id and ins.seq = i.seq and ins.lease_id = i.lease_id
    order by i.ord;
end $$;
revoke all on function queues.record_workflow_steps(bigint[], bigint[], integer[], text[], jsonb[], timestamptz[]) from public;
grant execute on function queues.record_workflow_steps(bigint[], bigint[], integer[], text[], jsonb[], timestamptz[]) to worker_service_user;
comment on function queues.record_workflow_steps(bigint[], bigint[], integer[], text[], jsonb[], timestamptz[]) is
    'Records many durable Go workflows'' step checkpoints, each under its task''s current lease; per row, false (nothing written) under a stale lease or when the position holds one already.';
