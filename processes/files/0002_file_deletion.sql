-- The file-deletion process (seed 002: the file deletion flow).
--
--   files.kickoff_file_deletion(file_id)  idempotent kickoff: one deletion process per file
--   files.file_deletion_supervisor        db_function: owns retries, backoff and termination
--   files.get_file_delete_payload         before handler: {bucket, object_key} of the file
--   files.record_file_delete_success      success handler: success fact, files.mark_file_deleted
--   files.record_file_delete_failure      error handler: failure fact (files.is_file_deletion_stuck)

create table files.file_deletion_task (
    file_deletion_task_id bigint generated always as identity primary key,
    file_id            bigint not null unique references files.file,
    scheduled_at       timestamptz not null default now(),   -- not before this
    created_at         timestamptz not null default now()
);

create table files.file_deletion_attempt (
    file_deletion_attempt_id bigint generated always as identity primary key,
    file_deletion_task_id    bigint not null references files.file_deletion_task,
    task_id               bigint,                             -- the file_delete channel task (queues.task)
    created_at            timestamptz not null default now()
);
create index file_deletion_attempt_task_idx on files.file_deletion_attempt (file_deletion_task_id, file_deletion_attempt_id);

create table files.file_deletion_attempt_succeeded (
    file_deletion_attempt_id bigint primary key references files.file_deletion_attempt,
    provider_response     jsonb,
    created_at            timestamptz not null default now()
);

create table files.file_deletion_attempt_failed (
    file_deletion_attempt_id bigint primary key references files.file_deletion_attempt,
    error_message         text not null,
    created_at            timestamptz not null default now()
);

-- Terminal facts of the process: deleted, or given up on (the reason says why).
create table files.file_deletion_task_succeeded (
    file_deletion_task_id bigint primary key references files.file_deletion_task,
    created_at         timestamptz not null default now()
);

create table files.file_deletion_task_failed (
    file_deletion_task_id bigint primary key references files.file_deletion_task,
    error_message      text not null,
    created_at         timestamptz not null default now()
);

create trigger file_deletion_attempt_succeeded_append_only before update on files.file_deletion_attempt_succeeded
    for each statement execute function internal.refuse_fact_update();
create trigger file_deletion_attempt_failed_append_only before update on files.file_deletion_attempt_failed
    for each statement execute function internal.refuse_fact_update();
create trigger file_deletion_task_succeeded_append_only before update on files.file_deletion_task_succeeded
    for each statement execute function internal.refuse_fact_update();
create trigger file_deletion_task_failed_append_only before update on files.file_deletion_task_failed
    for each statement execute function internal.refuse_fact_update();

-- Facts helpers (Input) -----------------------------------------------------------------------

create function files.has_file_deletion_succeeded_attempt(_file_deletion_task_id bigint) returns boolean
language sql stable set search_path = pg_catalog, pg_temp as $$
    select exists (select 1 from files.file_deletion_attempt a
                   join files.file_deletion_attempt_succeeded s using (file_deletion_attempt_id)
                   where a.file_deletion_task_id = _file_deletion_task_id)
$$;

create function files.count_file_deletion_failed_attempts(_file_deletion_task_id bigint) returns integer
language sql stable set search_path = pg_catalog, pg_temp as $$
    select count(*)::integer from files.file_deletion_attempt a
    join files.file_deletion_attempt_failed f using (file_deletion_attempt_id)
    where a.file_deletion_task_id = _file_deletion_task_id
$$;

create function files.count_file_deletion_attempts(_file_deletion_task_id bigint) returns integer
language sql stable set search_path = pg_catalog, pg_temp as $$
    select count(*)::integer from files.file_deletion_attempt where file_deletion_task_id = _file_deletion_task_id
$$;

-- Stuck (seed 002: files.is_file_deletion_stuck(file_id)): every allowed attempt failed and
-- none succeeded. The supervisor then records the terminal failure and stops.
create function files.is_file_deletion_stuck(_file_id bigint) returns boolean
language sql stable set search_path = pg_catalog, pg_temp as $$
    select exists (
        select 1 from files.file_deletion_task t
        where t.file_id = _file_id
          and not files.has_file_deletion_succeeded_attempt(t.file_deletion_task_id)
          and files.count_file_deletion_failed_attempts(t.file_deletion_task_id)
              >= (select max_attempts from files.process_config where process = 'file_deletion'))
$$;

-- Kickoff -----------------------------------------------------------------------------------

-- Starts deleting a file, once: a second call for the same file returns the existing
-- file_deletion_task_id and enqueues nothing. Bad input is answered with
-- validation_failure_message (and a null id), never an exception.
create function files.kickoff_file_deletion(
    _file_id bigint,
    _scheduled_at timestamptz default now(),
    out file_deletion_task_id bigint,
    out validation_failure_message text)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _file_id is null then
        validation_failure_message := 'kickoff_file_deletion: file_id is required';
        return;
    end if;
    if not exists (select 1 from files.file where file_id = _file_id) then
        validation_failure_message := format('kickoff_file_deletion: file %s does not exist', _file_id);
        return;
    end if;

    insert into files.file_deletion_task (file_id, scheduled_at)
    values (_file_id, coalesce(_scheduled_at, now()))
    on conflict (file_id) do nothing
    returning files.file_deletion_task.file_deletion_task_id into file_deletion_task_id;
    if file_deletion_task_id is null then
        select t.file_deletion_task_id into file_deletion_task_id from files.file_deletion_task t where t.file_id = _file_id;
        return;
    end if;

    perform queues.enqueue('db_function',
        jsonb_build_object('db_function', 'files.file_deletion_supervisor', 'file_deletion_task_id', file_deletion_task_id),
        coalesce(_scheduled_at, now()));
end $$;

-- Supervisor --------------------------------------------------------------------------------

-- Runs as a db_function task with {file_deletion_task_id}. Each run: lock the root row, read the
-- facts, and then either stop (a terminal fact exists; an attempt succeeded; attempts are
-- exhausted) or make sure one attempt is outstanding and look again later. A run carrying
-- "wake": true was enqueued by a handler the moment an attempt ended; it does the same work but
-- does not re-enqueue itself (the regular chain does), so there is only ever one chain.
create function files.file_deletion_supervisor(_payload jsonb) returns jsonb
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _id          bigint;
    _task        files.file_deletion_task;
    _cfg         files.process_config;
    _attempts    integer;
    _failures    integer;
    _last_fail   timestamptz;
    _next_try    timestamptz;
    _next_check  timestamptz;
    _open        record;
    _attempt_id  bigint;
    _channel_id  bigint;
    _wake        boolean := coalesce((_payload ->> 'wake')::boolean, false);
begin
    -- Input
    if jsonb_typeof(_payload -> 'file_deletion_task_id') is distinct from 'number' then
        return jsonb_build_object('success', false,
            'validation_failure_message', 'file_deletion_supervisor: payload needs a numeric file_deletion_task_id');
    end if;
    _id := (_payload ->> 'file_deletion_task_id')::bigint;
    select * into _task from files.file_deletion_task where file_deletion_task_id = _id for update;
    if not found then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('file_deletion_supervisor: file_deletion_task %s does not exist', _id));
    end if;
    if exists (select 1 from files.file_deletion_task_succeeded where file_deletion_task_id = _id)
       or exists (select 1 from files.file_deletion_task_failed where file_deletion_task_id = _id) then
        return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('state', 'terminal'));
    end if;
    select * into _cfg from files.process_config where process = 'file_deletion';

    -- An outstanding attempt whose channel task ended without recording an outcome (its
    -- handlers kept failing until the task died, or an operator cancelled it) counts as failed.
    -- (One statement, so the attempt's facts and its task's status come from one snapshot: a
    -- handler commits its fact and the task's completion together.)
    select a.file_deletion_attempt_id, a.task_id, t.status, t.last_error into _open
    from files.file_deletion_attempt a
    left join queues.task t on t.task_id = a.task_id
    where a.file_deletion_task_id = _id
      and not exists (select 1 from files.file_deletion_attempt_succeeded s where s.file_deletion_attempt_id = a.file_deletion_attempt_id)
      and not exists (select 1 from files.file_deletion_attempt_failed f where f.file_deletion_attempt_id = a.file_deletion_attempt_id)
    order by a.file_deletion_attempt_id desc limit 1;
    if found and (_open.status in ('completed', 'failed', 'dead', 'cancelled') or _open.status is null) then
        insert into files.file_deletion_attempt_failed (file_deletion_attempt_id, error_message)
        values (_open.file_deletion_attempt_id,
                format('the file_delete task %s ended %s without recording an outcome%s', _open.task_id,
                       coalesce(_open.status::text, 'and was removed'), coalesce(': ' || _open.last_error, '')))
        on conflict do nothing;
    end if;

    _attempts := files.count_file_deletion_attempts(_id);
    _failures := files.count_file_deletion_failed_attempts(_id);

    -- Compute
    if files.has_file_deletion_succeeded_attempt(_id) then
        insert into files.file_deletion_task_succeeded (file_deletion_task_id) values (_id) on conflict do nothing;
        return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('state', 'deleted', 'attempts', _attempts));
    end if;
    if files.is_file_deletion_stuck(_task.file_id) then
        insert into files.file_deletion_task_failed (file_deletion_task_id, error_message)
        values (_id, format('file not deleted after %s failed attempts (max %s); last error: %s', _failures, _cfg.max_attempts,
                            coalesce((select f.error_message from files.file_deletion_attempt a
                                      join files.file_deletion_attempt_failed f using (file_deletion_attempt_id)
                                      where a.file_deletion_task_id = _id order by f.created_at desc limit 1), 'none')))
        on conflict do nothing;
        return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('state', 'gave_up', 'attempts', _attempts));
    end if;
    select max(f.created_at) into _last_fail from files.file_deletion_attempt a
    join files.file_deletion_attempt_failed f using (file_deletion_attempt_id) where a.file_deletion_task_id = _id;
    _next_try := greatest(_task.scheduled_at, coalesce(_last_fail, '-infinity') + queues.process_backoff(_failures, _cfg.backoff_base, _cfg.backoff_max));

    -- Output
    if _attempts = _failures and _next_try <= now() then
        insert into files.file_deletion_attempt (file_deletion_task_id) values (_id) returning file_deletion_attempt_id into _attempt_id;
        _channel_id := queues.enqueue('file_delete', jsonb_build_object(
            'file_deletion_task_id', _id,
            'file_deletion_attempt_id', _attempt_id,
            'file_id', _task.file_id,
            'before_handler', 'files.get_file_delete_payload',
            'success_handler', 'files.record_file_delete_success',
            'error_handler', 'files.record_file_delete_failure'),
            now(), 0, null, 5);
        update files.file_deletion_attempt set task_id = _channel_id where file_deletion_attempt_id = _attempt_id;
        _next_check := now() + _cfg.check_interval;
    elsif _attempts = _failures then
        -- Backing off: look again the moment the backoff ends (once per failure count).
        _next_check := _next_try;
        perform queues.enqueue('db_function',
            jsonb_build_object('db_function', 'files.file_deletion_supervisor', 'file_deletion_task_id', _id, 'wake', true),
            _next_try, 0, format('files.file_deletion:%s:retry:%s', _id, _failures));
    else
        _next_check := now() + _cfg.check_interval;   -- an attempt is outstanding
    end if;

    if not _wake then
        perform queues.enqueue('db_function',
            jsonb_build_object('db_function', 'files.file_deletion_supervisor', 'file_deletion_task_id', _id),
            _next_check);
    end if;
    return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object(
        'state', 'in_progress', 'attempts', _attempts, 'failures', _failures,
        'new_attempt_id', _attempt_id, 'next_check_at', case when _wake then null else _next_check end));
end $$;

-- Handlers ----------------------------------------------------------------------------------

-- Before handler: resolves the file of one attempt into {bucket, object_key}. The worker asks
-- for a signed DELETE URL for it and sends the DELETE.
create function files.get_file_delete_payload(_payload jsonb) returns jsonb
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
declare
    _attempt_id bigint;
    _r record;
begin
    if jsonb_typeof(_payload -> 'file_deletion_attempt_id') is distinct from 'number' then
        return jsonb_build_object('success', false,
            'validation_failure_message', 'get_file_delete_payload: payload needs a numeric file_deletion_attempt_id');
    end if;
    _attempt_id := (_payload ->> 'file_deletion_attempt_id')::bigint;
    select f.file_id, f.bucket, f.object_key into _r
    from files.file_deletion_attempt a
    join files.file_deletion_task t using (file_deletion_task_id)
    join files.file f using (file_id)
    where a.file_deletion_attempt_id = _attempt_id;
    if not found then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('get_file_delete_payload: file_deletion_attempt %s does not exist', _attempt_id));
    end if;
    return jsonb_build_object('success', true, 'payload', jsonb_build_object(
        'bucket', _r.bucket,
        'object_key', _r.object_key,
        'file_id', _r.file_id,
        'file_deletion_attempt_id', _attempt_id));
end $$;

-- Wakes the supervisor of a process now (once per attempt outcome): the enqueue is keyed by the
-- attempt, so a handler that runs twice wakes it once.
create function files.wake_file_deletion_supervisor(_file_deletion_task_id bigint, _attempt_id bigint) returns void
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    select queues.enqueue('db_function',
        jsonb_build_object('db_function', 'files.file_deletion_supervisor', 'file_deletion_task_id', _file_deletion_task_id, 'wake', true),
        now(), 0, 'files.file_deletion:wake:' || _attempt_id);
$$;

-- Success handler: {original_payload, worker_payload}. Idempotent.
create function files.record_file_delete_success(_payload jsonb) returns jsonb
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _attempt_id bigint := (_payload #>> '{original_payload,file_deletion_attempt_id}')::bigint;
    _task_id    bigint;
begin
    select file_deletion_task_id into _task_id from files.file_deletion_attempt where file_deletion_attempt_id = _attempt_id;
    if not found then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('record_file_delete_success: file_deletion_attempt %s does not exist', coalesce(_attempt_id::text, 'NULL')));
    end if;
    insert into files.file_deletion_attempt_succeeded (file_deletion_attempt_id, provider_response)
    values (_attempt_id, _payload -> 'worker_payload')
    on conflict do nothing;
    perform files.mark_file_deleted(t.file_id) from files.file_deletion_task t where t.file_deletion_task_id = _task_id;
    perform files.wake_file_deletion_supervisor(_task_id, _attempt_id);
    return jsonb_build_object('success', true);
end $$;

-- Error handler: {original_payload, error}. Idempotent; never raises on a normal failure.
create function files.record_file_delete_failure(_payload jsonb) returns jsonb
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _attempt_id bigint := (_payload #>> '{original_payload,file_deletion_attempt_id}')::bigint;
    _task_id    bigint;
begin
    select file_deletion_task_id into _task_id from files.file_deletion_attempt where file_deletion_attempt_id = _attempt_id;
    if not found then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('record_file_delete_failure: file_deletion_attempt %s does not exist', coalesce(_attempt_id::text, 'NULL')));
    end if;
    insert into files.file_deletion_attempt_failed (file_deletion_attempt_id, error_message)
    values (_attempt_id, left(coalesce(nullif(_payload ->> 'error', ''), 'unknown error'), 8192))
    on conflict do nothing;
    perform files.wake_file_deletion_supervisor(_task_id, _attempt_id);
    return jsonb_build_object('success', true);
end $$;

-- Grants ------------------------------------------------------------------------------------
-- Nothing here is executable by PUBLIC. The worker may run the supervisor and the handlers,
-- function by function; applications are granted files.kickoff_file_deletion by the operator.
revoke all on all tables in schema files from public;
revoke all on function
    files.has_file_deletion_succeeded_attempt(bigint),
    files.count_file_deletion_failed_attempts(bigint),
    files.count_file_deletion_attempts(bigint),
    files.is_file_deletion_stuck(bigint),
    files.kickoff_file_deletion(bigint, timestamptz),
    files.file_deletion_supervisor(jsonb),
    files.get_file_delete_payload(jsonb),
    files.wake_file_deletion_supervisor(bigint, bigint),
    files.record_file_delete_success(jsonb),
    files.record_file_delete_failure(jsonb)
from public;
grant usage on schema files to worker_service_user;
grant execute on function
    files.file_deletion_supervisor(jsonb),
    files.get_file_delete_payload(jsonb),
    files.record_file_delete_success(jsonb),
    files.record_file_delete_failure(jsonb)
to worker_service_user;
