-- A claimed task gives up its debounce key (0017). The key makes at most one *pending* task of a
-- type per key, and a started task takes no more debounced enqueues; but a started task can be
-- pending again (a retry, an expired lease rescued, a task given back, a snooze) while a newer
-- one holds its key, and that update then broke the pending-only unique index: the statement
-- failed, and with it every claim (rescue_expired_leases runs first in each). Supervisor ticks
-- (0026) are debounced tasks, so a worker killed during a tick stopped every claim until an
-- operator stepped in. Now the key goes when the task is claimed, in the claim's own update.

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
    ), ev as (
        insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt)
        select u.task_id, 'claimed', 'pending', 'running', u.lease_id, _worker_id, u.attempt
        from upd u
    )
    select u.* from upd u
    order by u.priority desc, u.run_at, u.task_id;
end $$;

-- Tasks started before this migration keep no key either.
update queues.task set debounce_key = null where status <> 'pending' and debounce_key is not null;
