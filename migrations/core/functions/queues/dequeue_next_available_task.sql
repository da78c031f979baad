-- Seed 000/002: claims the next available task with a 5-minute lease, for a caller without a
-- worker id (psql, a script). Returns NULL when nothing is due.
create or replace function queues.dequeue_next_available_task() returns queues.task
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
begin
    select * into _t from queues.claim_tasks('sql:' || session_user, 1);
    return _t;
end $$;
revoke all on function queues.dequeue_next_available_task() from public;
grant execute on function queues.dequeue_next_available_task() to worker_service_user;

-- The same for a named worker and lease duration.
create or replace function queues.dequeue_next_available_task(_worker_id text, _lease_duration interval default interval '5 minutes')
returns queues.task
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
begin
    select * into _t from queues.claim_tasks(_worker_id, 1, _lease_duration);
    return _t;
end $$;
revoke all on function queues.dequeue_next_available_task(text, interval) from public;
grant execute on function queues.dequeue_next_available_task(text, interval) to worker_service_user;
