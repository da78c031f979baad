-- Removes a worker at shutdown, and resigns its leadership if it held it. Tasks it still holds
-- (it should have finished or released them first) are rescued when their leases expire.
-- True when the worker was registered.
create or replace function queues.deregister_worker(_worker_id text) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _found boolean;
begin
    delete from queues.worker where worker_id = _worker_id;
    _found := found;
    update queues.leader set worker_id = null, expires_at = now() where worker_id = _worker_id;
    return _found;
end $$;
revoke all on function queues.deregister_worker(text) from public;
grant execute on function queues.deregister_worker(text) to worker_service_user;

-- Deregisters one worker process at shutdown (and ends its leadership): nothing when another
-- process took its id over. True when its row was deleted.
create or replace function queues.deregister_worker(_worker_id text, _instance text) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    delete from queues.worker where worker_id = _worker_id and instance = _instance;
    if not found then
        return false;
    end if;
    update queues.leader set worker_id = null, expires_at = now() where worker_id = _worker_id;
    return true;
end $$;
revoke all on function queues.deregister_worker(text, text) from public;
grant execute on function queues.deregister_worker(text, text) to worker_service_user;
