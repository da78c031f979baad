-- The chaos harness's business schema: a db_function that records an effect, and an
-- idempotent producer of email processes. Applied once by the harness (as the superuser).

create schema chaos;

-- One row per application of a db_function task's effect. No unique constraint on purpose: a
-- second application must be recorded (and counted by the checker), not raise.
create table chaos.effect (
    effect_id   bigint generated always as identity primary key,
    key         text        not null,               -- the task's workload key (unique per task)
    txid        bigint      not null default txid_current(),
    backend_pid integer     not null default pg_backend_pid(),
    recorded_at timestamptz not null default clock_timestamp()
);
create index effect_key_idx on chaos.effect (key);

-- One row per completion of a task, written by a trigger on queues.task: the checker's own
-- witness of every outcome applied, since taskorch records a completion once, in the task's
-- row (a second completion would overwrite the first there). The trigger fires when a task
-- becomes completed or its completion changes, so a completion applied twice leaves two rows.
create table chaos.completion (
    completion_id bigint      generated always as identity primary key,
    task_id       bigint      not null,
    lease_id      bigint,                            -- the lease the completion was applied under
    completed_at  timestamptz not null
);
create index completion_task_id_idx on chaos.completion (task_id);

create function chaos.record_completion() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into chaos.completion (task_id, lease_id, completed_at)
    values (new.task_id, new.lease_id, new.completed_at);
    return null;
end $$;

create trigger chaos_completion after update on queues.task
for each row
when (new.status = 'completed'
      and (old.status is distinct from 'completed' or old.completed_at is distinct from new.completed_at
           or old.lease_id is distinct from new.lease_id))
execute function chaos.record_completion();

-- The email processes the producer started, by workload key: a retried producer batch finds
-- the key and does not start a second process.
create table chaos.email_request (
    key                text primary key,
    send_email_task_id bigint not null,
    recipient          text   not null,
    expect             text   not null check (expect in ('sent', 'gave_up'))
);

-- db_function: records the effect, optionally sleeps (so faults find it in flight) and
-- enqueues a child task (without an idempotency key: a second run would make a second child,
-- which the checker would see).
create function chaos.apply_effect(_p jsonb) returns jsonb
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _p ->> 'key' is null then
        return jsonb_build_object('success', false, 'validation_failure_message', 'chaos.apply_effect: no key');
    end if;
    insert into chaos.effect (key) values (_p ->> 'key');
    if coalesce((_p ->> 'sleep_ms')::integer, 0) > 0 then
        perform pg_sleep((_p ->> 'sleep_ms')::integer / 1000.0);
    end if;
    if coalesce((_p ->> 'child')::boolean, false) then
        perform queues.enqueue('taskorch.noop', jsonb_build_object('parent', _p ->> 'key'));
    end if;
    return jsonb_build_object('status', 'succeeded');
end $$;

-- One node of a chaos workflow: a chaos.apply_effect task with the idempotency key chaos-<key>,
-- waiting for _after (docs/workflows.md); three in ten sleep 50-500 ms, so that faults find
-- them running. Enqueued again (a retried producer batch), it returns the existing task.
create function chaos.enqueue_node(_key text, _after bigint[]) returns bigint
language sql volatile set search_path = pg_catalog, pg_temp as $$
    select queues.enqueue('db_function',
        jsonb_build_object('db_function', 'chaos.apply_effect', 'key', _key,
                           'sleep_ms', case when abs(hashtext(_key)) % 10 < 3 then 50 + abs(hashtext(_key)) % 451 else 0 end),
        _idempotency_key => 'chaos-' || _key, _after => _after)
$$;

-- Enqueues one workflow per key: a diamond (a; b and c after a; d after b and c) or a chain
-- (a; b after a; c after b), nodes <key>.a, <key>.b, ... A retried batch finds every node by its
-- idempotency key and adds nothing. Returns how many workflows it was given.
create function chaos.enqueue_workflows(_keys text[], _shapes text[]) returns integer
language plpgsql volatile set search_path = pg_catalog, pg_temp as $$
declare
    _r record;
    _a bigint;
    _b bigint;
    _c bigint;
begin
    for _r in select * from unnest(_keys, _shapes) as u(key, shape) loop
        _a := chaos.enqueue_node(_r.key || '.a', null);
        _b := chaos.enqueue_node(_r.key || '.b', array[_a]);
        if _r.shape = 'diamond' then
            _c := chaos.enqueue_node(_r.key || '.c', array[_a]);
            perform chaos.enqueue_node(_r.key || '.d', array[_b, _c]);
        else
            perform chaos.enqueue_node(_r.key || '.c', array[_b]);
        end if;
    end loop;
    return coalesce(cardinality(_keys), 0);
end $$;

-- Starts one email process per key not seen before; returns how many it started.
create function chaos.send_emails(_keys text[], _tos text[], _expects text[]) returns integer
language plpgsql volatile set search_path = pg_catalog, pg_temp as $$
declare
    _n  integer := 0;
    _r  record;
    _id bigint;
begin
    for _r in select * from unnest(_keys, _tos, _expects) as u(key, recipient, expect) loop
        if not exists (select from chaos.email_request where key = _r.key) then
            if _r.recipient like 'once-%' then
                -- The outbox fails this recipient's first delivery: the process retries.
                insert into queues.outbox_rule (channel, recipient, fail, error_message)
                values ('email', _r.recipient, 'once', 'chaos: first delivery refused')
                on conflict do nothing;
            end if;
            _id := comms.send_email(_r.recipient, 'chaos ' || _r.key, 'chaos message ' || _r.key);
            insert into chaos.email_request (key, send_email_task_id, recipient, expect)
            values (_r.key, _id, _r.recipient, _r.expect);
            _n := _n + 1;
        end if;
    end loop;
    return _n;
end $$;

-- The durable Go workflows' witnesses (cmd/taskorch/internal/chaosflow). No unique constraint on
-- either table on purpose: a StepTx effect committed twice, or a Step run again, must be recorded
-- (and counted by the checker), not raise.
--
-- One row per commit of a StepTx's effect: by workload key and step name, in the step's
-- transaction (with its checkpoint); effect-2 carries the signal's payload.
create table chaos.durable_effect (
    durable_effect_id bigint      generated always as identity primary key,
    key               text        not null,
    step              text        not null,
    payload           jsonb,
    recorded_at       timestamptz not null default clock_timestamp()
);
create index durable_effect_key_idx on chaos.durable_effect (key, step);

-- One row per run of a Step's function, with its StepKey, written outside any transaction (at
-- least once: a run whose checkpoint was lost runs the step again, with the same key).
create table chaos.durable_step (
    durable_step_id bigint      generated always as identity primary key,
    key             text        not null,
    step            text        not null,
    step_key        text        not null,
    recorded_at     timestamptz not null default clock_timestamp()
);
create index durable_step_key_idx on chaos.durable_step (key, step);

create function chaos.record_durable_effect(_key text, _step text, _payload jsonb) returns void
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    insert into chaos.durable_effect (key, step, payload) values (_key, _step, _payload)
$$;

create function chaos.record_durable_step(_key text, _step text, _step_key text) returns void
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    insert into chaos.durable_step (key, step, step_key) values (_key, _step, _step_key)
$$;

-- Sends each key's durable workflow its signal (first emit wins: a batch sent again changes
-- nothing); returns how many it was given.
create function chaos.signal_durable(_keys text[]) returns integer
language sql volatile set search_path = pg_catalog, pg_temp as $$
    select count(queues.signal('chaos.durable', k, jsonb_build_object('key', k)))::integer
    from unnest(_keys) as k
$$;

-- Email processes retry fast under chaos; one recipient always fails (the process gives up).
update comms.process_config
set max_attempts = 5, backoff_base = interval '200 milliseconds', backoff_max = interval '2 seconds',
    check_interval = interval '2 seconds'
where process = 'send_email';
insert into queues.outbox_rule (channel, recipient, fail, error_message)
values ('email', 'always@fail.chaos.test', 'always', 'chaos: this recipient always fails');

revoke all on all functions in schema chaos from public;
grant usage on schema chaos to worker_service_user;
grant execute on function chaos.apply_effect(jsonb) to worker_service_user;
grant execute on function chaos.record_durable_effect(text, text, jsonb), chaos.record_durable_step(text, text, text)
    to worker_service_user;
