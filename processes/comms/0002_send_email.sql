-- The send-email process (seed 000 "Example Flow: Send Email Task", seed 002 "Email example").
--
--   comms.send_email(...)            app: create the message and start the process
--   comms.kickoff_send_email(...)    idempotent kickoff for an existing message
--   comms.send_email_supervisor      db_function: Input (facts) -> Compute -> Output
--   comms.get_email_payload          before handler: the provider request for an attempt
--   comms.record_email_success       success handler: the attempt's success fact
--   comms.record_email_failure       error handler: the attempt's failure fact
--
-- Tables follow the building blocks: a root task, its attempts, and one fact per attempt
-- outcome; the terminal outcome of the whole process is a fact on the root as well.

create table comms.send_email_task (
    send_email_task_id bigint generated always as identity primary key,
    message_id         bigint not null unique references comms.email_message,
    scheduled_at       timestamptz not null default now(),   -- not sent before this
    created_at         timestamptz not null default now()
);

create table comms.send_email_attempt (
    send_email_attempt_id bigint generated always as identity primary key,
    send_email_task_id    bigint not null references comms.send_email_task,
    task_id               bigint,                             -- the email channel task (queues.task)
    created_at            timestamptz not null default now()
);
-- (task, attempt): "the newest open attempt of a task" is an index range, not a scan of every attempt.
create index send_email_attempt_task_idx on comms.send_email_attempt (send_email_task_id, send_email_attempt_id);

create table comms.send_email_attempt_succeeded (
    send_email_attempt_id bigint primary key references comms.send_email_attempt,
    provider_response     jsonb,
    created_at            timestamptz not null default now()
);

create table comms.send_email_attempt_failed (
    send_email_attempt_id bigint primary key references comms.send_email_attempt,
    error_message         text not null,
    created_at            timestamptz not null default now()
);

-- Terminal facts of the process: sent, or given up on (the reason says why).
create table comms.send_email_task_succeeded (
    send_email_task_id bigint primary key references comms.send_email_task,
    created_at         timestamptz not null default now()
);

create table comms.send_email_task_failed (
    send_email_task_id bigint primary key references comms.send_email_task,
    error_message      text not null,
    created_at         timestamptz not null default now()
);

create trigger send_email_attempt_succeeded_append_only before update on comms.send_email_attempt_succeeded
    for each statement execute function internal.refuse_fact_update();
create trigger send_email_attempt_failed_append_only before update on comms.send_email_attempt_failed
    for each statement execute function internal.refuse_fact_update();
create trigger send_email_task_succeeded_append_only before update on comms.send_email_task_succeeded
    for each statement execute function internal.refuse_fact_update();
create trigger send_email_task_failed_append_only before update on comms.send_email_task_failed
    for each statement execute function internal.refuse_fact_update();

-- Facts helpers (Input) -----------------------------------------------------------------------

create function comms.has_send_email_succeeded_attempt(_send_email_task_id bigint) returns boolean
language sql stable set search_path = pg_catalog, pg_temp as $$
    select exists (select 1 from comms.send_email_attempt a
                   join comms.send_email_attempt_succeeded s using (send_email_attempt_id)
                   where a.send_email_task_id = _send_email_task_id)
$$;

create function comms.count_send_email_failed_attempts(_send_email_task_id bigint) returns integer
language sql stable set search_path = pg_catalog, pg_temp as $$
    select count(*)::integer from comms.send_email_attempt a
    join comms.send_email_attempt_failed f using (send_email_attempt_id)
    where a.send_email_task_id = _send_email_task_id
$$;

create function comms.count_send_email_attempts(_send_email_task_id bigint) returns integer
language sql stable set search_path = pg_catalog, pg_temp as $$
    select count(*)::integer from comms.send_email_attempt where send_email_task_id = _send_email_task_id
$$;

-- Stuck: every allowed attempt failed and none succeeded. The supervisor then records the
-- terminal failure and stops.
create function comms.is_send_email_stuck(_send_email_task_id bigint) returns boolean
language sql stable set search_path = pg_catalog, pg_temp as $$
    select not comms.has_send_email_succeeded_attempt(_send_email_task_id)
       and comms.count_send_email_failed_attempts(_send_email_task_id)
           >= (select max_attempts from comms.process_config where process = 'send_email')
$$;

-- Kickoff -----------------------------------------------------------------------------------

-- Starts the process for an existing email message, once: a second call for the same message
-- returns the existing send_email_task_id and enqueues nothing. Bad input is answered with
-- validation_failure_message (and a null id), never an exception.
create function comms.kickoff_send_email(
    _message_id bigint,
    _scheduled_at timestamptz default now(),
    out send_email_task_id bigint,
    out validation_failure_message text)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _message_id is null then
        validation_failure_message := 'kickoff_send_email: message_id is required';
        return;
    end if;
    if not exists (select 1 from comms.email_message where message_id = _message_id) then
        validation_failure_message := format('kickoff_send_email: email message %s does not exist', _message_id);
        return;
    end if;

    insert into comms.send_email_task (message_id, scheduled_at)
    values (_message_id, coalesce(_scheduled_at, now()))
    on conflict (message_id) do nothing
    returning comms.send_email_task.send_email_task_id into send_email_task_id;
    if send_email_task_id is null then
        -- Already started: the supervisor is running.
        select t.send_email_task_id into send_email_task_id from comms.send_email_task t where t.message_id = _message_id;
        return;
    end if;

    perform queues.enqueue('db_function',
        jsonb_build_object('db_function', 'comms.send_email_supervisor', 'send_email_task_id', send_email_task_id),
        coalesce(_scheduled_at, now()));
end $$;

-- Creates an email message and starts sending it (at _scheduled_at: a precise future time is
-- honoured). Returns the send_email_task_id. Invalid input raises invalid_parameter_value
-- (SQLSTATE 22023) with a message naming the field.
create function comms.send_email(
    _to text,
    _subject text,
    _text text default null,
    _html text default null,
    _scheduled_at timestamptz default now())
returns bigint
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _message_id bigint;
    _k record;
begin
    if _to is null or _to !~ '^[^@\s<>,;]+@[^@\s<>,;]+\.[^@\s<>,;]+$' or length(_to) > 320 then
        raise exception 'send_email: _to must be one email address, got %', coalesce(quote_literal(left(_to, 100)), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _subject is null or btrim(_subject) = '' or length(_subject) > 998 or _subject ~ '[\r\n]' then
        raise exception 'send_email: _subject must be one non-empty line of at most 998 characters'
            using errcode = 'invalid_parameter_value';
    end if;
    if _text is null and _html is null then
        raise exception 'send_email: give _text, _html or both' using errcode = 'invalid_parameter_value';
    end if;

    insert into comms.message (channel) values ('email') returning message_id into _message_id;
    insert into comms.email_message (message_id, to_address, subject, text_body, html_body)
    values (_message_id, _to, _subject, _text, _html);

    select * into _k from comms.kickoff_send_email(_message_id, _scheduled_at);
    if _k.validation_failure_message is not null then
        raise exception '%', _k.validation_failure_message using errcode = 'invalid_parameter_value';
    end if;
    return _k.send_email_task_id;
end $$;

-- Supervisor --------------------------------------------------------------------------------

-- Runs as a db_function task with {send_email_task_id}. Each run: lock the root row, read the
-- facts, and then either stop (a terminal fact exists; an attempt succeeded; attempts are
-- exhausted) or make sure one attempt is outstanding and look again later. A run carrying
-- "wake": true was enqueued by a handler the moment an attempt ended; it does the same work but
-- does not re-enqueue itself (the regular chain does), so there is only ever one chain.
create function comms.send_email_supervisor(_payload jsonb) returns jsonb
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _id          bigint;
    _task        comms.send_email_task;
    _cfg         comms.process_config;
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
    if jsonb_typeof(_payload -> 'send_email_task_id') is distinct from 'number' then
        return jsonb_build_object('success', false,
            'validation_failure_message', 'send_email_supervisor: payload needs a numeric send_email_task_id');
    end if;
    _id := (_payload ->> 'send_email_task_id')::bigint;
    select * into _task from comms.send_email_task where send_email_task_id = _id for update;
    if not found then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('send_email_supervisor: send_email_task %s does not exist', _id));
    end if;
    if exists (select 1 from comms.send_email_task_succeeded where send_email_task_id = _id)
       or exists (select 1 from comms.send_email_task_failed where send_email_task_id = _id) then
        return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('state', 'terminal'));
    end if;
    select * into _cfg from comms.process_config where process = 'send_email';

    -- An outstanding attempt whose channel task ended without recording an outcome (its
    -- handlers kept failing until the task died, or an operator cancelled it) counts as failed.
    -- (One statement, so the attempt's facts and its task's status come from one snapshot: a
    -- handler commits its fact and the task's completion together.)
    select a.send_email_attempt_id, a.task_id, t.status, t.last_error into _open
    from comms.send_email_attempt a
    left join queues.task t on t.task_id = a.task_id
    where a.send_email_task_id = _id
      and not exists (select 1 from comms.send_email_attempt_succeeded s where s.send_email_attempt_id = a.send_email_attempt_id)
      and not exists (select 1 from comms.send_email_attempt_failed f where f.send_email_attempt_id = a.send_email_attempt_id)
    order by a.send_email_attempt_id desc limit 1;
    if found and (_open.status in ('completed', 'failed', 'dead', 'cancelled') or _open.status is null) then
        insert into comms.send_email_attempt_failed (send_email_attempt_id, error_message)
        values (_open.send_email_attempt_id,
                format('the email task %s ended %s without recording an outcome%s', _open.task_id,
                       coalesce(_open.status::text, 'and was removed'), coalesce(': ' || _open.last_error, '')))
        on conflict do nothing;
    end if;

    _attempts := comms.count_send_email_attempts(_id);
    _failures := comms.count_send_email_failed_attempts(_id);

    -- Compute
    if comms.has_send_email_succeeded_attempt(_id) then
        insert into comms.send_email_task_succeeded (send_email_task_id) values (_id) on conflict do nothing;
        return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('state', 'sent', 'attempts', _attempts));
    end if;
    if comms.is_send_email_stuck(_id) then
        insert into comms.send_email_task_failed (send_email_task_id, error_message)
        values (_id, format('email not sent after %s failed attempts (max %s); last error: %s', _failures, _cfg.max_attempts,
                            coalesce((select f.error_message from comms.send_email_attempt a
                                      join comms.send_email_attempt_failed f using (send_email_attempt_id)
                                      where a.send_email_task_id = _id order by f.created_at desc limit 1), 'none')))
        on conflict do nothing;
        return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('state', 'gave_up', 'attempts', _attempts));
    end if;
    select max(f.created_at) into _last_fail from comms.send_email_attempt a
    join comms.send_email_attempt_failed f using (send_email_attempt_id) where a.send_email_task_id = _id;
    _next_try := greatest(_task.scheduled_at, coalesce(_last_fail, '-infinity') + queues.process_backoff(_failures, _cfg.backoff_base, _cfg.backoff_max));

    -- Output
    if _attempts = _failures and _next_try <= now() then
        insert into comms.send_email_attempt (send_email_task_id) values (_id) returning send_email_attempt_id into _attempt_id;
        _channel_id := queues.enqueue('email', jsonb_build_object(
            'send_email_task_id', _id,
            'send_email_attempt_id', _attempt_id,
            'before_handler', 'comms.get_email_payload',
            'success_handler', 'comms.record_email_success',
            'error_handler', 'comms.record_email_failure'),
            now(), 0, null, 5);
        update comms.send_email_attempt set task_id = _channel_id where send_email_attempt_id = _attempt_id;
        _next_check := now() + _cfg.check_interval;
    elsif _attempts = _failures then
        -- Backing off: look again the moment the backoff ends (once per failure count).
        _next_check := _next_try;
        perform queues.enqueue('db_function',
            jsonb_build_object('db_function', 'comms.send_email_supervisor', 'send_email_task_id', _id, 'wake', true),
            _next_try, 0, format('comms.send_email:%s:retry:%s', _id, _failures));
    else
        _next_check := now() + _cfg.check_interval;   -- an attempt is outstanding
    end if;

    if not _wake then
        perform queues.enqueue('db_function',
            jsonb_build_object('db_function', 'comms.send_email_supervisor', 'send_email_task_id', _id),
            _next_check);
    end if;
    return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object(
        'state', 'in_progress', 'attempts', _attempts, 'failures', _failures,
        'new_attempt_id', _attempt_id, 'next_check_at', case when _wake then null else _next_check end));
end $$;

-- Handlers ----------------------------------------------------------------------------------

-- Before handler: the provider request for one attempt. The idempotency key is derived from the
-- attempt, so a re-run of the same attempt after a crash is deduplicated by providers that
-- honour keys (Resend).
create function comms.get_email_payload(_payload jsonb) returns jsonb
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
declare
    _attempt_id bigint;
    _r record;
begin
    if jsonb_typeof(_payload -> 'send_email_attempt_id') is distinct from 'number' then
        return jsonb_build_object('success', false,
            'validation_failure_message', 'get_email_payload: payload needs a numeric send_email_attempt_id');
    end if;
    _attempt_id := (_payload ->> 'send_email_attempt_id')::bigint;
    select m.*, a.send_email_task_id into _r
    from comms.send_email_attempt a
    join comms.send_email_task t using (send_email_task_id)
    join comms.email_message m using (message_id)
    where a.send_email_attempt_id = _attempt_id;
    if not found then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('get_email_payload: send_email_attempt %s does not exist', _attempt_id));
    end if;
    if comms.has_send_email_succeeded_attempt(_r.send_email_task_id) then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('get_email_payload: send_email_task %s was already sent; not sending twice', _r.send_email_task_id));
    end if;
    return jsonb_build_object('success', true, 'payload', jsonb_strip_nulls(jsonb_build_object(
        'to', _r.to_address,
        'from', _r.from_address,
        'subject', _r.subject,
        'text', _r.text_body,
        'html', _r.html_body,
        'message_id', _r.message_id,
        'send_email_attempt_id', _attempt_id,
        'idempotency_key', 'comms-send-email-attempt-' || _attempt_id)));
end $$;

-- Wakes the supervisor of a process now (once per attempt outcome): the enqueue is keyed by the
-- attempt, so a handler that runs twice wakes it once.
create function comms.wake_send_email_supervisor(_send_email_task_id bigint, _attempt_id bigint) returns void
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    select queues.enqueue('db_function',
        jsonb_build_object('db_function', 'comms.send_email_supervisor', 'send_email_task_id', _send_email_task_id, 'wake', true),
        now(), 0, 'comms.send_email:wake:' || _attempt_id);
$$;

-- Success handler: {original_payload, worker_payload}. Idempotent.
create function comms.record_email_success(_payload jsonb) returns jsonb
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _attempt_id bigint := (_payload #>> '{original_payload,send_email_attempt_id}')::bigint;
    _task_id    bigint;
begin
    select send_email_task_id into _task_id from comms.send_email_attempt where send_email_attempt_id = _attempt_id;
    if not found then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('record_email_success: send_email_attempt %s does not exist', coalesce(_attempt_id::text, 'NULL')));
    end if;
    insert into comms.send_email_attempt_succeeded (send_email_attempt_id, provider_response)
    values (_attempt_id, _payload -> 'worker_payload')
    on conflict do nothing;
    perform comms.wake_send_email_supervisor(_task_id, _attempt_id);
    return jsonb_build_object('success', true);
end $$;

-- Error handler: {original_payload, error}. Idempotent; never raises on a normal failure.
create function comms.record_email_failure(_payload jsonb) returns jsonb
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _attempt_id bigint := (_payload #>> '{original_payload,send_email_attempt_id}')::bigint;
    _task_id    bigint;
begin
    select send_email_task_id into _task_id from comms.send_email_attempt where send_email_attempt_id = _attempt_id;
    if not found then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('record_email_failure: send_email_attempt %s does not exist', coalesce(_attempt_id::text, 'NULL')));
    end if;
    insert into comms.send_email_attempt_failed (send_email_attempt_id, error_message)
    values (_attempt_id, left(coalesce(nullif(_payload ->> 'error', ''), 'unknown error'), 8192))
    on conflict do nothing;
    perform comms.wake_send_email_supervisor(_task_id, _attempt_id);
    return jsonb_build_object('success', true);
end $$;

-- Grants ------------------------------------------------------------------------------------
-- Nothing here is executable by PUBLIC. The worker may run the supervisor and the handlers,
-- function by function; applications are granted comms.send_email / kickoff by the operator.
revoke all on all tables in schema comms from public;
revoke all on function
    comms.has_send_email_succeeded_attempt(bigint),
    comms.count_send_email_failed_attempts(bigint),
    comms.count_send_email_attempts(bigint),
    comms.is_send_email_stuck(bigint),
    comms.kickoff_send_email(bigint, timestamptz),
    comms.send_email(text, text, text, text, timestamptz),
    comms.send_email_supervisor(jsonb),
    comms.get_email_payload(jsonb),
    comms.wake_send_email_supervisor(bigint, bigint),
    comms.record_email_success(jsonb),
    comms.record_email_failure(jsonb)
from public;
grant usage on schema comms to worker_service_user;
grant execute on function
    comms.send_email_supervisor(jsonb),
    comms.get_email_payload(jsonb),
    comms.record_email_success(jsonb),
    comms.record_email_failure(jsonb)
to worker_service_user;
