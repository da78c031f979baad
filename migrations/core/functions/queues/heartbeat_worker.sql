-- A worker's heartbeat: one UPDATE of its row. False when the row is gone (a leader reaped the
-- worker and recovered its tasks): the worker registers again, and its outcomes for the tasks
-- it held are refused, since their leases were recovered.
create or replace function queues.heartbeat_worker(_worker_id text) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    update queues.worker set last_heartbeat = now() where worker_id = _worker_id;
    return found;
end $$;
revoke all on function queues.heartbeat_worker(text) from public;
grant execute on function queues.heartbeat_worker(text) to worker_service_user;

-- A heartbeat of one worker process: false when its row is gone (reaped) or another process
-- took its id over.
create or replace function queues.heartbeat_worker(_worker_id text, _instance text) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    update queues.worker set last_heartbeat = now() where worker_id = _worker_id and instance = _instance;
    return found;
end $$;
revoke all on function queues.heartbeat_worker(text, text) from public;
grant execute on function queues.heartbeat_worker(text, text) to worker_service_user;
