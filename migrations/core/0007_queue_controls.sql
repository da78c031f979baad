-- Queue controls and the dev outbox.
--
-- 1. Pause/resume by task type: a paused type is not claimed (tasks already running finish);
--    enqueueing goes on, so nothing is lost while a queue is paused.
-- 2. The outbox: what the dev providers ("outbox") would have sent — an email, an SMS, a file
--    deletion — recorded instead of sent, for `taskorch dev` and the dashboard's /outbox page.
--    Rules can make a recipient fail, always or once, so a demo shows a failure and a retry.

create table queues.queue_pause (
    task_type  text primary key,
    paused_at  timestamptz not null default now(),
    paused_by  text
);

comment on table queues.queue_pause is
    'Task types whose pending tasks are not claimed. Written by queues.pause_queue/resume_queue.';

-- Pauses a task type. True when it was running and is now paused; false when already paused.
create function queues.pause_queue(_task_type text, _paused_by text default null) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _n integer;
begin
    if _task_type is null or btrim(_task_type) = '' then
        raise exception 'pause_queue: _task_type is required' using errcode = 'invalid_parameter_value';
    end if;
    insert into queues.queue_pause (task_type, paused_by)
    values (_task_type, coalesce(_paused_by, session_user))
    on conflict (task_type) do nothing;
    get diagnostics _n = row_count;
    return _n = 1;
end $$;

-- Resumes a task type and wakes the workers. True when it was paused.
create function queues.resume_queue(_task_type text) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    delete from queues.queue_pause where task_type = _task_type;
    if found then
        perform pg_notify('taskorch_task', _task_type);
        return true;
    end if;
    return false;
end $$;

-- claim_tasks (0002) again, skipping paused task types. The paused list is read once per call
-- into an array: with nothing paused the claim query is the one it was.
create or replace function queues.claim_tasks(
    _worker_id text,
    _limit integer,
    _lease_duration interval default interval '5 minutes',
    _task_types text[] default null)
returns setof queues.task
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _paused text[];
begin
    if _limit is null or _limit < 1 then
        raise exception 'claim_tasks: _limit must be at least 1, got %', _limit using errcode = 'invalid_parameter_value';
    end if;
    if _lease_duration is null or _lease_duration <= interval '0' then
        raise exception 'claim_tasks: _lease_duration must be positive, got %', _lease_duration
            using errcode = 'invalid_parameter_value';
    end if;

    perform queues.rescue_expired_leases();

    _paused := array(select qp.task_type from queues.queue_pause qp);

    return query
    with picked as (
        select t.task_id, t.attempt
        from queues.task t
        where t.status = 'pending'
          and t.run_at <= now()
          and (_task_types is null or t.task_type = any (_task_types))
          and (cardinality(_paused) = 0 or t.task_type <> all (_paused))
        order by t.priority desc, t.run_at, t.task_id
        limit _limit
        for update skip locked
    ), leases as (
        insert into queues.task_lease (task_id, worker_id, attempt, leased_at, expires_at)
        select p.task_id, _worker_id, p.attempt + 1, now(), now() + _lease_duration
        from picked p
        returning task_lease_id, task_id, attempt, expires_at
    ), upd as (
        update queues.task t
        set status = 'running',
            lease_id = l.task_lease_id,
            lease_expires_at = l.expires_at,
            worker_id = _worker_id,
            attempt = l.attempt,
            claimed_at = now()
        from leases l
        where t.task_id = l.task_id
        returning t.*
    ), ev as (
        insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt)
        select u.task_id, 'claimed', 'pending', 'running', u.lease_id, _worker_id, u.attempt
        from upd u
    )
    select u.* from upd u
    order by u.priority desc, u.run_at, u.task_id;
end $$;

-- The outbox ---------------------------------------------------------------------------------

create table queues.outbox_message (
    outbox_message_id bigint generated always as identity primary key,
    task_id           bigint,
    channel           text not null check (channel in ('email', 'sms', 'file_delete')),
    recipient         text,
    request           jsonb not null,
    status            text not null check (status in ('sent', 'failed')),
    error             text,
    recorded_at       timestamptz not null default now()
);

create index outbox_message_recipient_idx on queues.outbox_message (channel, recipient, status);

comment on table queues.outbox_message is
    'What the dev "outbox" providers recorded instead of sending (append-only).';

-- Rules for the outbox: a recipient that fails always, or only the first time it is sent to.
create table queues.outbox_rule (
    channel       text not null check (channel in ('email', 'sms', 'file_delete')),
    recipient     text not null,
    fail          text not null check (fail in ('always', 'once')),
    error_message text not null default 'delivery refused by a rule (dev provider)',
    primary key (channel, recipient)
);

comment on table queues.outbox_rule is
    'Dev outbox rules: make a recipient fail always or once, to show failures and retries.';

create trigger outbox_message_append_only before update on queues.outbox_message
    for each row execute function internal.refuse_update();

-- Records one outbox delivery. The recipient is the request's "to" (email, SMS) or
-- "bucket/object_key" (file deletion). Returns {status: "sent"|"failed", outbox_message_id,
-- error}: "failed" when a rule says so, and the failure is recorded too.
create function queues.record_outbox_message(_task_id bigint, _channel text, _request jsonb) returns jsonb
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _recipient text;
    _rule      queues.outbox_rule;
    _status    text := 'sent';
    _error     text;
    _id        bigint;
begin
    if _channel is null or _channel not in ('email', 'sms', 'file_delete') then
        raise exception 'record_outbox_message: unknown channel %', coalesce(_channel, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _request is null or jsonb_typeof(_request) <> 'object' then
        raise exception 'record_outbox_message: the request must be a JSON object'
            using errcode = 'invalid_parameter_value';
    end if;
    _recipient := case _channel
        when 'file_delete' then (_request ->> 'bucket') || '/' || (_request ->> 'object_key')
        else _request ->> 'to'
    end;

    select * into _rule from queues.outbox_rule r where r.channel = _channel and r.recipient = _recipient;
    if found then
        -- Serialise deliveries to one ruled recipient so "once" means once.
        perform pg_advisory_xact_lock(hashtext('taskorch.outbox'), hashtext(_channel || ':' || _recipient));
        if _rule.fail = 'always'
           or not exists (select 1 from queues.outbox_message m
                          where m.channel = _channel and m.recipient = _recipient and m.status = 'failed') then
            _status := 'failed';
            _error := _rule.error_message;
        end if;
    end if;

    insert into queues.outbox_message (task_id, channel, recipient, request, status, error)
    values (_task_id, _channel, _recipient, _request, _status, _error)
    returning outbox_message_id into _id;

    return jsonb_build_object('status', _status, 'outbox_message_id', _id, 'error', _error);
end $$;

revoke all on table queues.queue_pause, queues.outbox_message, queues.outbox_rule from public;
revoke all on function
    queues.pause_queue(text, text),
    queues.resume_queue(text),
    queues.record_outbox_message(bigint, text, jsonb)
from public;
grant execute on function queues.record_outbox_message(bigint, text, jsonb) to worker_service_user;
