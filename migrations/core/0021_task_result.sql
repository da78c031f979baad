-- A task's result, stored with its completion, and waiting for a task to finish.
--
-- queues.task.result holds what a task returned: a Go handler's return value or SetResult, a
-- db_function's envelope payload. It is written by queues.complete_tasks_with_results in the
-- same statement, and so the same transaction, as the completion, and is deleted with the task
-- by retention. A nullable column without a default is added without rewriting the table, and a
-- completion without a result writes NULL where it wrote nothing before (docs/benchmarks.md
-- compares the two); a side table would cost an insert and, for retention, a delete per result.
--
-- The bound is the payload's (internal.max_payload_bytes(), 8 MiB as pg_column_size counts it,
-- 0018): a completion whose result is over it fails the task instead, without retry, with a
-- message naming the sizes; the other tasks of the batch complete. The constraint
-- task_result_size is the last line of defence for direct writes; it is added NOT VALID because
-- every existing row is NULL, so nothing needs scanning.
--
-- Waiting (Client.Wait, docs/sql.md "Results and waiting"): a waiter registers the task in
-- queues.task_waiter (unlogged: a crash forgets waiters, whose safety re-check registers them
-- again) with queues.watch_task, and LISTENs on taskorch_task_done. A statement-level trigger on
-- queues.task notifies only when some registered task has reached a terminal status: when nobody
-- waits, an update of queues.task pays one look at an empty table and no NOTIFY.

alter table queues.task add column result jsonb;
alter table queues.task add constraint task_result_size
    check (pg_column_size(result) <= 8 * 1024 * 1024) not valid;
comment on column queues.task.result is
    'What the task returned (a Go handler''s result, a db_function envelope''s payload), written with its completion; NULL when none.';

-- Completes tasks as queues.complete_tasks (0002) does, storing each one's result in the same
-- statement: _results[i] (NULL for none) goes with _task_ids[i]; _results may be NULL for a batch
-- without results. Returns one row per task completed (a repeat under the completing lease
-- included) with status 'completed', and one per task whose result was over the bound with
-- status 'failed' (it is failed without retry, its error in queues.error). A task refused (not
-- running under the lease) is not returned; the refusal is recorded in queues.error.
create function queues.complete_tasks_with_results(_task_ids bigint[], _lease_ids bigint[], _results jsonb[])
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
        returning t.task_id, t.lease_id, t.worker_id, t.attempt
    ), ev as (
        insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt)
        select d.task_id, 'completed', 'running', 'completed', d.lease_id, d.worker_id, d.attempt
        from done d
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

revoke all on function queues.complete_tasks_with_results(bigint[], bigint[], jsonb[]) from public;
grant execute on function queues.complete_tasks_with_results(bigint[], bigint[], jsonb[]) to worker_service_user;

-- Tasks someone waits for. One row per task, however many wait; the row goes when the task
-- reaches a terminal status (the trigger below) and is refreshed by each waiter's re-check.
create unlogged table queues.task_waiter (
    task_id    bigint primary key,
    watched_at timestamptz not null default now()
);
comment on table queues.task_waiter is
    'Tasks a Client.Wait is waiting for: their terminal transition sends NOTIFY taskorch_task_done. Unlogged: waiters re-register.';

-- Registers a waiter for task _task_id and returns its status, or NULL when there is no such task
-- (nothing is registered then). Call it after LISTEN taskorch_task_done: a task that reaches a
-- terminal status after this returns is announced on that channel with its id. The status is
-- read under a share lock, so a transition that is being committed is waited for and seen: no
-- terminal transition falls between the answer and the notification.
create function queues.watch_task(_task_id bigint) returns text
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _s queues.task_status;
begin
    select t.status into _s from queues.task t where t.task_id = _task_id for share;
    if not found then
        return null;
    end if;
    if _s not in ('completed', 'failed', 'dead', 'cancelled') then
        insert into queues.task_waiter (task_id) values (_task_id)
        on conflict (task_id) do update set watched_at = excluded.watched_at;
    end if;
    return _s::text;
end $$;

revoke all on function queues.watch_task(bigint) from public;

-- After every update of queues.task's status: when some waited-for task is now terminal, forget
-- its waiter row and NOTIFY taskorch_task_done with the ids (comma-separated, 300 per
-- notification). With no waiters this is one look at an empty table. No transition table: it
-- would copy every updated row of every claim and completion, waiters or not.
create function internal.notify_task_done() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _chunks text[];
    _ids text;
begin
    if not exists (select from queues.task_waiter) then
        return null;
    end if;
    -- Driven by the waiter rows, one primary-key lookup each (a scalar subquery is never turned
    -- into a join): a join let the planner hash the whole task table, 82 ms for a statement
    -- completing 500 tasks with 1,000 waiters; this costs about 2 ms more than no trigger
    -- (docs/benchmarks.md, "Results and waiting").
    with gone as (
        delete from queues.task_waiter w
        where (select t.status from queues.task t where t.task_id = w.task_id) in ('completed', 'failed', 'dead', 'cancelled')
        returning w.task_id
    ), numbered as (
        select g.task_id, (row_number() over (order by g.task_id) - 1) / 300 as chunk from gone g
    )
    select array_agg(s.ids) into _chunks
    from (select string_agg(n.task_id::text, ',' order by n.task_id) as ids from numbered n group by n.chunk) s;
    foreach _ids in array coalesce(_chunks, '{}') loop
        perform pg_notify('taskorch_task_done', _ids);
    end loop;
    return null;
end $$;

revoke all on function internal.notify_task_done() from public;

create trigger task_done_notify after update of status on queues.task
    for each statement execute function internal.notify_task_done();
