-- Fewer writes per task: a claim and a completion no longer write a task_event row. The 'claimed'
-- event repeated the task_lease row written by the same claim (task, lease, worker, attempt,
-- time), and the 'completed' event repeated the task's own row (completed_at, lease_id,
-- worker_id, attempt; last_error for a failed call). Every other event stays: those carry what
-- nothing else records (a retry's reason, an expired or recovered lease, a cancel, a release).
--
-- queues.task_history gives the history back as one view, in order: the task_lease rows as
-- 'claimed', the stored events, the errors, and the completion from the task row. Events stored
-- before this migration ('claimed', 'completed') are read from the same sources, so an upgraded
-- database shows each once. docs/sql.md ("Task history") describes it.

create or replace function internal.lease_tasks(_worker_id text, _task_ids bigint[], _lease_duration interval)
returns setof queues.task
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    return query
    with upd as (
        update queues.task t
        set status = 'running',
            lease_id = nextval('queues.task_lease_task_lease_id_seq'::regclass),
            lease_expires_at = now() + _lease_duration,
            worker_id = _worker_id,
            attempt = t.attempt + 1,
            claimed_at = now(),
            debounce_key = null
        where t.task_id = any (_task_ids) and t.status = 'pending'
        returning t.*
    ), leases as (
        insert into queues.task_lease (task_lease_id, task_id, worker_id, attempt, leased_at, expires_at)
        overriding system value
        select u.lease_id, u.task_id, _worker_id, u.attempt, now(), u.lease_expires_at
        from upd u
    )
    select u.* from upd u
    order by u.priority desc, u.run_at, u.task_id;
end $$;

create or replace function queues.complete_tasks_with_results(_task_ids bigint[], _lease_ids bigint[], _results jsonb[])
returns table (task_id bigint, status text)
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
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

    with done as (
        update queues.task t
        set status = 'completed', completed_at = now(), lease_expires_at = null, result = c.result
        from unnest(_task_ids, _lease_ids, coalesce(_results, array_fill(null::jsonb, array[_n])))
             as c(task_id, lease_id, result)
        where t.task_id = c.task_id and t.lease_id = c.lease_id and t.lease_expires_at is not null  -- i.e. running
          and c.task_id <> all (_skip)
        returning t.task_id
    )
    select coalesce(array_agg(d.task_id), '{}') into _done from done d;

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

-- Completes a channel task whose call failed (0019), without the 'completed' event: the task
-- row keeps the error (last_error) and what failed (call_failure), and queues.task_history
-- shows the completion with the error as its detail.
create or replace function queues.complete_failed_call(_task_id bigint, _lease_id bigint, _reason text, _error_message text)
returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _msg text := left(coalesce(nullif(_error_message, ''), 'unknown error'), 8192);
begin
    update queues.task t
    set status = 'completed', completed_at = now(), lease_expires_at = null,
        last_error = _msg, call_failure = coalesce(nullif(_reason, ''), 'call_failed')
    where t.task_id = _task_id and t.lease_id = _lease_id and t.lease_expires_at is not null;  -- i.e. running
    if found then
        return true;
    end if;
    -- Not running under the lease: complete_task says whether it is a repeat, or records the refusal.
    return queues.complete_task(_task_id, _lease_id);
end $$;

-- One task's history, merged from where each fact is written once. Order a task's rows by
-- (occurred_at, step, source_id): within one transaction (one occurred_at) an event comes
-- before the claim it made way for (a rescued lease's 'lease_expired', then the new claim),
-- errors after, and the completion last.
--   source 'lease': a claim, event 'claimed' (pending -> running), source_id the lease id;
--   source 'event': a stored state change (retry_scheduled, failed, dead, lease_expired,
--                   recovered, cancelled, released, snoozed, retried, ...), source_id its id;
--   source 'error': a queues.error row, event 'error', detail its message, source_id its id;
--   source 'task':  the completion, event 'completed' (running -> completed) under the task's
--                   last lease, detail the error when the task's channel call failed.
create view queues.task_history as
select e.task_id, e.occurred_at, 0::smallint as step, 'event'::text as source, e.task_event_id as source_id,
       e.event, e.from_status, e.to_status, e.lease_id, e.worker_id, e.attempt, e.detail
from queues.task_event e
where e.event not in ('claimed', 'completed')  -- written before 0032; read from their sources below
union all
select l.task_id, l.leased_at, 1::smallint, 'lease', l.task_lease_id,
       'claimed', 'pending'::queues.task_status, 'running'::queues.task_status, l.task_lease_id, l.worker_id, l.attempt, null
from queues.task_lease l
union all
select r.task_id, r.occurred_at, 2::smallint, 'error', r.error_id,
       'error', null, null,
       case when r.context ->> 'lease_id' ~ '^[0-9]{1,18}$' then (r.context ->> 'lease_id')::bigint end,  -- as the writers put it
       r.context ->> 'worker_id', null, r.error_message
from queues.error r
where r.task_id is not null
union all
select t.task_id, t.completed_at, 3::smallint, 'task', t.task_id,
       'completed', 'running'::queues.task_status, 'completed'::queues.task_status, t.lease_id, t.worker_id, t.attempt,
       case when t.call_failure is not null then t.last_error end
from queues.task t
where t.status = 'completed';

comment on view queues.task_history is
    'Every task''s history in one place: claims (task_lease), state changes (task_event), errors (error) and the completion (task). Order by occurred_at, step, source_id.';

-- Like the tables it reads, the view is the owner's; grant select on it to an operator's role to
-- delegate reading history.
