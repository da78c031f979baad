-- As in core/0032 (with core/0033's cached plan), and a claim needs a worker id: a task leased
-- to none could be found by no release and no recovery, only by its lease's expiry. (A claim
-- for an id that is not registered — queues.dequeue_next_available_task's 'sql:<role>', a
-- tool — is fine: its tasks come back when their lease expires.)
create or replace function internal.lease_tasks(_worker_id text, _task_ids bigint[], _lease_duration interval)
returns setof queues.task
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan as $$
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
revoke all on function internal.lease_tasks(text, bigint[], interval) from public;
