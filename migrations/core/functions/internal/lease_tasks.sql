-- Leases the pending tasks of _task_ids to _worker_id, the claim's candidates (claim_tasks,
-- claim_tasks_by_id, claim_limited_tasks): one lease row each, whose id is the task's fencing
-- token. A claim needs a worker id: a task leased to none could be found by no release and no
-- recovery, only by its lease's expiry. (A claim for an id that is not registered —
-- queues.dequeue_next_available_task's 'sql:<role>', a tool — is fine: its tasks come back when
-- their lease expires.) The plan is cached (force_generic_plan).
--
-- A claim is stamped with the time it takes its tasks (clock_timestamp()), not the start of its
-- transaction, as outcomes are: a claim's transaction starts, then finds its candidates in a
-- later statement, with a snapshot of its own, so a task another transaction failed and made due
-- in between would be claimed under a lease stamped before that failure, and its history
-- (queues.task_history, ordered by time) would show the claim before the retry that made it
-- possible. The lease's expiry counts from the same moment.
create or replace function internal.lease_tasks(_worker_id text, _task_ids bigint[], _lease_duration interval)
returns setof queues.task
language plpgsql security definer set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan as $$
declare
    _now timestamptz := clock_timestamp();
begin
    if _worker_id is null or btrim(_worker_id) = '' then
        raise exception 'claim: _worker_id must name the claiming worker, got %', coalesce(quote_literal(_worker_id), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    return query
    with upd as (
        update queues.task t
        set status = 'running',
            lease_id = nextval('queues.task_lease_task_lease_id_seq'::regclass),
            lease_expires_at = _now + _lease_duration,
            worker_id = _worker_id,
            attempt = t.attempt + 1,
            claimed_at = _now,
            debounce_key = null
        where t.task_id = any (_task_ids) and t.status = 'pending'
        returning t.*
    ), leases as (
        insert into queues.task_lease (task_lease_id, task_id, worker_id, attempt, leased_at, expires_at)
        overriding system value
        select u.lease_id, u.task_id, _worker_id, u.attempt, _now, u.lease_expires_at
        from upd u
    )
    select u.* from upd u
    order by u.priority desc, u.run_at, u.task_id;
end $$;
revoke all on function internal.lease_tasks(text, bigint[], interval) from public;
