-- The registration of queues.register_worker_instance without a process or a session (tools,
-- tests, workers of older versions). It does not replace a row a worker process registered.
create or replace function queues.register_worker(
    _worker_id text,
    _hostname text,
    _pid integer default null,
    _pool_size integer default 0,
    _version text default null,
    _transport text default null,
    _task_types text[] default null)
returns void
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _instance text;
begin
    if _worker_id is null or length(_worker_id) not between 1 and 256 then
        raise exception 'register_worker: worker_id must be 1 to 256 characters' using errcode = 'invalid_parameter_value';
    end if;
    if _hostname is null then
        raise exception 'register_worker: hostname must not be NULL' using errcode = 'invalid_parameter_value';
    end if;
    if _pool_size is not null and _pool_size < 0 then
        raise exception 'register_worker: pool_size must not be negative, got %', _pool_size
            using errcode = 'invalid_parameter_value';
    end if;
    select w.instance into _instance from queues.worker w where w.worker_id = _worker_id;
    if _instance is not null then
        raise exception 'register_worker: worker id % is registered by a worker process (queues.register_worker_instance)', _worker_id
            using errcode = 'object_in_use';
    end if;
    insert into queues.worker as w (worker_id, hostname, pid, pool_size, version, transport, task_types)
    values (_worker_id, _hostname, _pid, coalesce(_pool_size, 0), _version, _transport, _task_types)
    on conflict (worker_id) do update
    set hostname = excluded.hostname, pid = excluded.pid, pool_size = excluded.pool_size,
        version = excluded.version, transport = excluded.transport, task_types = excluded.task_types,
        started_at = now(), last_heartbeat = now(),
        instance = null, session_key = null, session_pid = null, session_epoch = null, session_lost_at = null;
end $$;
revoke all on function queues.register_worker(text, text, integer, integer, text, text, text[]) from public;
grant execute on function queues.register_worker(text, text, integer, integer, text, text, text[]) to worker_service_user;
