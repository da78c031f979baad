-- Registers a worker process (_instance: random, one per process) under _worker_id. With
-- _session, the calling connection becomes the worker's session: it takes the session lock and
-- its death will tell the worker's. Call it again (same instance) after the session was lost or
-- the worker was reaped: it keeps its tasks.
--
-- A row of another process under the same id: while that process lives (its session is alive,
-- or, without a session, its heartbeat is younger than _worker_timeout) the registration is
-- refused (55006, object_in_use), and the caller tries again later; once it is gone, this one
-- takes over: the previous process's running tasks are recovered at once (fenced, the attempt
-- counts) and its leadership, if any, ends. Returns the session key (NULL without a session)
-- and the number of tasks recovered.
create or replace function queues.register_worker_instance(
    _worker_id text,
    _instance text,
    _hostname text,
    _pid integer,
    _pool_size integer,
    _version text,
    _transport text,
    _task_types text[],
    _session boolean,
    _worker_timeout interval)
returns table (session_key integer, tasks_recovered integer)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    _old queues.worker;
    _state text;
    _key integer;
    _recovered integer := 0;
    _inserted bigint := 0;
begin
    if _worker_id is null or btrim(_worker_id) = '' or length(_worker_id) > 256 then
        raise exception 'register_worker_instance: _worker_id must be 1 to 256 characters, not blank'
            using errcode = 'invalid_parameter_value';
    end if;
    if _instance is null or btrim(_instance) = '' or length(_instance) > 128 then
        raise exception 'register_worker_instance: _instance must be 1 to 128 characters, not blank'
            using errcode = 'invalid_parameter_value';
    end if;
    if _hostname is null then
        raise exception 'register_worker_instance: _hostname must not be NULL' using errcode = 'invalid_parameter_value';
    end if;
    if _pool_size is not null and _pool_size < 0 then
        raise exception 'register_worker_instance: _pool_size must not be negative, got %', _pool_size
            using errcode = 'invalid_parameter_value';
    end if;
    if _session is null then
        raise exception 'register_worker_instance: _session must not be NULL' using errcode = 'invalid_parameter_value';
    end if;
    if _worker_timeout is null or _worker_timeout <= interval '0' or _worker_timeout > interval '1 day' then
        raise exception 'register_worker_instance: _worker_timeout must be positive and at most a day, got %', _worker_timeout
            using errcode = 'invalid_parameter_value';
    end if;

    -- The row, locked; or a new one, which a concurrent registration of the same id may have
    -- inserted first (then it is read and locked on the second round).
    for _round in 1 .. 3 loop
        select * into _old from queues.worker w where w.worker_id = _worker_id for update;
        exit when found;
        insert into queues.worker as w (worker_id, hostname, pid, pool_size, version, transport, task_types, instance)
        values (_worker_id, _hostname, _pid, coalesce(_pool_size, 0), _version, _transport, _task_types, _instance)
        on conflict (worker_id) do nothing;
        get diagnostics _inserted = row_count;
        if _inserted > 0 then
            select * into _old from queues.worker w where w.worker_id = _worker_id;
            exit;
        end if;
    end loop;
    if _old.worker_id is null then
        raise exception 'register_worker_instance: worker id % is being registered and deregistered concurrently', _worker_id
            using errcode = 'serialization_failure';
    end if;

    if _old.instance is distinct from _instance then
        -- Another process registered this id. While it lives, refuse; once gone, take over.
        _state := internal.worker_session_state(_old.session_key, _old.session_epoch);
        if _state = 'alive' or (_state = 'none' and _old.last_heartbeat > now() - _worker_timeout) then
            raise exception 'register_worker_instance: worker id % is in use by a live worker (hostname %, pid %, registered %, %)',
                _worker_id, _old.hostname, _old.pid, _old.started_at,
                case when _state = 'alive' then 'its session ' || _old.session_pid || ' is alive'
                     else 'last heartbeat ' || _old.last_heartbeat end
                using errcode = 'object_in_use',
                      hint = 'Give each running worker its own id; a restarted worker takes over its id once the previous process is gone.';
        end if;
        select count(*)::integer into _recovered
        from internal.recover_worker_tasks(array[_worker_id],
            'worker %1$s registered again as a new process; the previous one is gone: lease %2$s recovered, attempt %3$s of %4$s',
            jsonb_build_object('cause', 'worker_restarted', 'previous_instance', _old.instance,
                               'previous_hostname', _old.hostname, 'previous_pid', _old.pid,
                               'previous_session', _state));
        update queues.leader set worker_id = null, expires_at = now() where worker_id = _worker_id;
    end if;

    if _session then
        _key := nextval('queues.worker_session_key_seq');
        if not pg_try_advisory_lock(internal.worker_session_class(), _key) then
            raise exception 'register_worker_instance: session lock % is held by another session', _key
                using errcode = 'object_in_use';
        end if;
    end if;

    update queues.worker w
    set hostname = _hostname, pid = _pid, pool_size = coalesce(_pool_size, 0), version = _version,
        transport = _transport, task_types = _task_types,
        started_at = case when w.instance is not distinct from _instance and _inserted = 0 then w.started_at else now() end,
        last_heartbeat = now(),
        instance = _instance,
        session_key = _key,
        session_pid = case when _session then pg_backend_pid() end,
        session_epoch = case when _session then pg_postmaster_start_time() end,
        session_lost_at = null
    where w.worker_id = _worker_id;

    return query select _key, _recovered;
end $$;
revoke all on function queues.register_worker_instance(text, text, text, integer, integer, text, text, text[], boolean, interval) from public;
grant execute on function queues.register_worker_instance(text, text, text, integer, integer, text, text, text[], boolean, interval) to worker_service_user;
