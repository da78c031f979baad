-- The accounts process set (seed 002: "Example checklist: account and file deletion
-- supervisors"). Installed with `taskorch migrate up --processes accounts` (which brings the
-- files set); see docs/processes.md.
--
--   api.request_account_deletion(account_id)   the application's entry point: flags the
--                                              account 'deleted' and starts the process
--   accounts.account_deletion_supervisor       db_function: starts a file deletion for every
--       file of the account; when all succeeded, starts the anonymization; stops at a terminal
--       fact, or fails the root task naming what got stuck
--   accounts.account_anonymization_supervisor  db_function: attempts accounts.anonymize_account
--       with backoff up to max attempts (pure SQL: the supervisor runs each attempt itself)

create schema if not exists accounts;
create schema if not exists api;
comment on schema accounts is 'taskorch processes: accounts and their deletion (docs/processes.md)';
comment on schema api is 'Entry points an application calls';

create table accounts.account (
    account_id   bigint generated always as identity primary key,
    email        text,
    display_name text,
    created_at   timestamptz not null default now()
);

-- Flags are facts about an account: 'deleted' (deletion requested), 'anonymized' (personal data
-- erased). Append-only.
create table accounts.account_flag (
    account_id bigint not null references accounts.account,
    flag       text not null check (flag in ('deleted', 'anonymized')),
    created_at timestamptz not null default now(),
    primary key (account_id, flag)
);

-- Files belong to accounts (files.file.owner_account_id, from the files set).
alter table files.file add constraint file_owner_account_fk
    foreign key (owner_account_id) references accounts.account;

-- Settings (see comms.process_config). account_deletion uses check_interval only: its retries
-- are those of the file deletions and the anonymization it starts.
create table accounts.process_config (
    process        text primary key check (process in ('account_deletion', 'account_anonymization')),
    max_attempts   integer  not null check (max_attempts > 0),
    backoff_base   interval not null check (backoff_base >= interval '0'),
    backoff_max    interval not null check (backoff_max >= interval '0'),
    check_interval interval not null check (check_interval > interval '0')
);
insert into accounts.process_config values
    ('account_deletion',      1, interval '0',          interval '0',         interval '5 seconds'),
    ('account_anonymization', 3, interval '10 seconds', interval '10 minutes', interval '30 seconds');

-- Account deletion: the root process --------------------------------------------------------

create table accounts.account_deletion_task (
    account_deletion_task_id bigint generated always as identity primary key,
    account_id               bigint not null unique references accounts.account,
    created_at               timestamptz not null default now()
);

create table accounts.account_deletion_task_succeeded (
    account_deletion_task_id bigint primary key references accounts.account_deletion_task,
    created_at               timestamptz not null default now()
);

create table accounts.account_deletion_task_failed (
    account_deletion_task_id bigint primary key references accounts.account_deletion_task,
    error_message            text not null,
    created_at               timestamptz not null default now()
);

-- Account anonymization: a child process with attempts ----------------------------------------

create table accounts.account_anonymization_task (
    account_anonymization_task_id bigint generated always as identity primary key,
    account_id                    bigint not null unique references accounts.account,
    created_at                    timestamptz not null default now()
);

create table accounts.account_anonymization_attempt (
    account_anonymization_attempt_id bigint generated always as identity primary key,
    account_anonymization_task_id    bigint not null references accounts.account_anonymization_task,
    created_at                       timestamptz not null default now()
);
create index account_anonymization_attempt_task_idx on accounts.account_anonymization_attempt (account_anonymization_task_id, account_anonymization_attempt_id);

create table accounts.account_anonymization_attempt_succeeded (
    account_anonymization_attempt_id bigint primary key references accounts.account_anonymization_attempt,
    created_at                       timestamptz not null default now()
);

create table accounts.account_anonymization_attempt_failed (
    account_anonymization_attempt_id bigint primary key references accounts.account_anonymization_attempt,
    error_message                    text not null,
    created_at                       timestamptz not null default now()
);

create table accounts.account_anonymization_task_succeeded (
    account_anonymization_task_id bigint primary key references accounts.account_anonymization_task,
    created_at                    timestamptz not null default now()
);

create table accounts.account_anonymization_task_failed (
    account_anonymization_task_id bigint primary key references accounts.account_anonymization_task,
    error_message                 text not null,
    created_at                    timestamptz not null default now()
);

create trigger account_flag_append_only before update on accounts.account_flag
    for each statement execute function internal.refuse_fact_update();
create trigger account_deletion_task_succeeded_append_only before update on accounts.account_deletion_task_succeeded
    for each statement execute function internal.refuse_fact_update();
create trigger account_deletion_task_failed_append_only before update on accounts.account_deletion_task_failed
    for each statement execute function internal.refuse_fact_update();
create trigger account_anonymization_attempt_succeeded_append_only before update on accounts.account_anonymization_attempt_succeeded
    for each statement execute function internal.refuse_fact_update();
create trigger account_anonymization_attempt_failed_append_only before update on accounts.account_anonymization_attempt_failed
    for each statement execute function internal.refuse_fact_update();
create trigger account_anonymization_task_succeeded_append_only before update on accounts.account_anonymization_task_succeeded
    for each statement execute function internal.refuse_fact_update();
create trigger account_anonymization_task_failed_append_only before update on accounts.account_anonymization_task_failed
    for each statement execute function internal.refuse_fact_update();

-- Facts helpers -------------------------------------------------------------------------------

create function accounts.has_account_anonymization_succeeded_attempt(_account_anonymization_task_id bigint) returns boolean
language sql stable set search_path = pg_catalog, pg_temp as $$
    select exists (select 1 from accounts.account_anonymization_attempt a
                   join accounts.account_anonymization_attempt_succeeded s using (account_anonymization_attempt_id)
                   where a.account_anonymization_task_id = _account_anonymization_task_id)
$$;

create function accounts.count_account_anonymization_failed_attempts(_account_anonymization_task_id bigint) returns integer
language sql stable set search_path = pg_catalog, pg_temp as $$
    select count(*)::integer from accounts.account_anonymization_attempt a
    join accounts.account_anonymization_attempt_failed f using (account_anonymization_attempt_id)
    where a.account_anonymization_task_id = _account_anonymization_task_id
$$;

create function accounts.count_account_anonymization_attempts(_account_anonymization_task_id bigint) returns integer
language sql stable set search_path = pg_catalog, pg_temp as $$
    select count(*)::integer from accounts.account_anonymization_attempt
    where account_anonymization_task_id = _account_anonymization_task_id
$$;

-- Stuck (seed 002: accounts.is_account_anonymization_stuck(account_id)): every allowed attempt
-- failed and none succeeded.
create function accounts.is_account_anonymization_stuck(_account_id bigint) returns boolean
language sql stable set search_path = pg_catalog, pg_temp as $$
    select exists (
        select 1 from accounts.account_anonymization_task t
        where t.account_id = _account_id
          and not accounts.has_account_anonymization_succeeded_attempt(t.account_anonymization_task_id)
          and accounts.count_account_anonymization_failed_attempts(t.account_anonymization_task_id)
              >= (select max_attempts from accounts.process_config where process = 'account_anonymization'))
$$;

create function accounts.has_account_flag(_account_id bigint, _flag text) returns boolean
language sql stable set search_path = pg_catalog, pg_temp as $$
    select exists (select 1 from accounts.account_flag where account_id = _account_id and flag = _flag)
$$;

-- The work ------------------------------------------------------------------------------------

-- Erases an account's personal data and flags it 'anonymized'. Idempotent.
create function accounts.anonymize_account(_account_id bigint) returns void
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    update accounts.account
    set email = null, display_name = null
    where account_id = _account_id;
    if not found then
        raise exception 'anonymize_account: account % does not exist', _account_id using errcode = 'no_data_found';
    end if;
    insert into accounts.account_flag (account_id, flag) values (_account_id, 'anonymized') on conflict do nothing;
end $$;

-- Kickoffs ------------------------------------------------------------------------------------

-- Starts deleting an account, once per account. Bad input is answered with
-- validation_failure_message (and a null id), never an exception.
create function accounts.kickoff_account_deletion(
    _account_id bigint,
    _scheduled_at timestamptz default now(),
    out account_deletion_task_id bigint,
    out validation_failure_message text)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _account_id is null then
        validation_failure_message := 'kickoff_account_deletion: account_id is required';
        return;
    end if;
    if not exists (select 1 from accounts.account where account_id = _account_id) then
        validation_failure_message := format('kickoff_account_deletion: account %s does not exist', _account_id);
        return;
    end if;
    insert into accounts.account_deletion_task (account_id) values (_account_id)
    on conflict (account_id) do nothing
    returning accounts.account_deletion_task.account_deletion_task_id into account_deletion_task_id;
    if account_deletion_task_id is null then
        select t.account_deletion_task_id into account_deletion_task_id
        from accounts.account_deletion_task t where t.account_id = _account_id;
        return;
    end if;
    perform queues.enqueue('db_function',
        jsonb_build_object('db_function', 'accounts.account_deletion_supervisor', 'account_deletion_task_id', account_deletion_task_id),
        coalesce(_scheduled_at, now()));
end $$;

-- Seed 002's entry point: flags the account 'deleted' and starts its deletion. Idempotent.
create function api.request_account_deletion(
    _account_id bigint,
    out account_deletion_task_id bigint,
    out validation_failure_message text)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _k record;
begin
    select * into _k from accounts.kickoff_account_deletion(_account_id);
    account_deletion_task_id := _k.account_deletion_task_id;
    validation_failure_message := _k.validation_failure_message;
    if validation_failure_message is null then
        insert into accounts.account_flag (account_id, flag) values (_account_id, 'deleted') on conflict do nothing;
    end if;
end $$;

create function accounts.kickoff_account_anonymization(
    _account_id bigint,
    out account_anonymization_task_id bigint,
    out validation_failure_message text)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _account_id is null or not exists (select 1 from accounts.account where account_id = _account_id) then
        validation_failure_message := format('kickoff_account_anonymization: account %s does not exist', coalesce(_account_id::text, 'NULL'));
        return;
    end if;
    insert into accounts.account_anonymization_task (account_id) values (_account_id)
    on conflict (account_id) do nothing
    returning accounts.account_anonymization_task.account_anonymization_task_id into account_anonymization_task_id;
    if account_anonymization_task_id is null then
        select t.account_anonymization_task_id into account_anonymization_task_id
        from accounts.account_anonymization_task t where t.account_id = _account_id;
        return;
    end if;
    perform queues.enqueue('db_function',
        jsonb_build_object('db_function', 'accounts.account_anonymization_supervisor',
                           'account_anonymization_task_id', account_anonymization_task_id));
end $$;

-- Supervisors ---------------------------------------------------------------------------------

-- The root: Input (the account's files and their deletion facts, the anonymization facts) ->
-- Compute -> Output (kick off what is missing; record a terminal fact; look again later).
create function accounts.account_deletion_supervisor(_payload jsonb) returns jsonb
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _id       bigint;
    _task     accounts.account_deletion_task;
    _cfg      accounts.process_config;
    _stuck    record;
    _anon     accounts.account_anonymization_task;
    _files    integer;
    _deleted  integer;
    _started  integer := 0;
    _k        record;
begin
    -- Input
    if jsonb_typeof(_payload -> 'account_deletion_task_id') is distinct from 'number' then
        return jsonb_build_object('success', false,
            'validation_failure_message', 'account_deletion_supervisor: payload needs a numeric account_deletion_task_id');
    end if;
    _id := (_payload ->> 'account_deletion_task_id')::bigint;
    select * into _task from accounts.account_deletion_task where account_deletion_task_id = _id for update;
    if not found then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('account_deletion_supervisor: account_deletion_task %s does not exist', _id));
    end if;
    if exists (select 1 from accounts.account_deletion_task_succeeded where account_deletion_task_id = _id)
       or exists (select 1 from accounts.account_deletion_task_failed where account_deletion_task_id = _id) then
        return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('state', 'terminal'));
    end if;
    select * into _cfg from accounts.process_config where process = 'account_deletion';

    -- Compute + Output, phase 1: every file of the account deleted.
    for _k in
        select f.file_id from files.file f
        where f.owner_account_id = _task.account_id
          and not exists (select 1 from files.file_deletion_task d where d.file_id = f.file_id)
    loop
        perform files.kickoff_file_deletion(_k.file_id);
        _started := _started + 1;
    end loop;

    select f.file_id, f.bucket, f.object_key, tf.error_message into _stuck
    from files.file f
    join files.file_deletion_task d using (file_id)
    left join files.file_deletion_task_failed tf using (file_deletion_task_id)
    where f.owner_account_id = _task.account_id
      and (tf.file_deletion_task_id is not null or files.is_file_deletion_stuck(f.file_id))
    order by f.file_id limit 1;
    if found then
        insert into accounts.account_deletion_task_failed (account_deletion_task_id, error_message)
        values (_id, format('account %s: file deletion stuck for file %s (%s/%s): %s', _task.account_id,
                            _stuck.file_id, _stuck.bucket, _stuck.object_key, coalesce(_stuck.error_message, 'attempts exhausted')))
        on conflict do nothing;
        return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('state', 'file_deletion_stuck', 'file_id', _stuck.file_id));
    end if;

    select count(*), count(*) filter (where exists (
               select 1 from files.file_deletion_task d
               join files.file_deletion_task_succeeded s using (file_deletion_task_id)
               where d.file_id = f.file_id))
    into _files, _deleted
    from files.file f where f.owner_account_id = _task.account_id;

    -- Phase 2: once every file is gone, anonymize.
    if _deleted = _files then
        select * into _k from accounts.kickoff_account_anonymization(_task.account_id);
        select * into _anon from accounts.account_anonymization_task where account_id = _task.account_id;
        if exists (select 1 from accounts.account_anonymization_task_succeeded where account_anonymization_task_id = _anon.account_anonymization_task_id) then
            insert into accounts.account_deletion_task_succeeded (account_deletion_task_id) values (_id) on conflict do nothing;
            return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('state', 'deleted', 'files', _files));
        end if;
        if exists (select 1 from accounts.account_anonymization_task_failed where account_anonymization_task_id = _anon.account_anonymization_task_id)
           or accounts.is_account_anonymization_stuck(_task.account_id) then
            insert into accounts.account_deletion_task_failed (account_deletion_task_id, error_message)
            values (_id, format('account %s: account anonymization stuck: %s', _task.account_id,
                                coalesce((select error_message from accounts.account_anonymization_task_failed
                                          where account_anonymization_task_id = _anon.account_anonymization_task_id),
                                         'attempts exhausted')))
            on conflict do nothing;
            return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('state', 'anonymization_stuck'));
        end if;
    end if;

    perform queues.enqueue('db_function',
        jsonb_build_object('db_function', 'accounts.account_deletion_supervisor', 'account_deletion_task_id', _id),
        now() + _cfg.check_interval);
    return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object(
        'state', case when _deleted = _files then 'anonymizing' else 'deleting_files' end,
        'files', _files, 'files_deleted', _deleted, 'file_deletions_started', _started));
end $$;

-- The anonymization: pure SQL, so each run makes the attempt itself (seed 002, "Decide on channel
-- shape"). An attempt that raises is rolled back to its savepoint and recorded as a failure
-- fact; the next one waits out the backoff; after max attempts the process is stuck.
create function accounts.account_anonymization_supervisor(_payload jsonb) returns jsonb
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _id         bigint;
    _task       accounts.account_anonymization_task;
    _cfg        accounts.process_config;
    _failures   integer;
    _last_fail  timestamptz;
    _next_try   timestamptz;
    _attempt_id bigint;
    _err        text;
begin
    if jsonb_typeof(_payload -> 'account_anonymization_task_id') is distinct from 'number' then
        return jsonb_build_object('success', false,
            'validation_failure_message', 'account_anonymization_supervisor: payload needs a numeric account_anonymization_task_id');
    end if;
    _id := (_payload ->> 'account_anonymization_task_id')::bigint;
    select * into _task from accounts.account_anonymization_task where account_anonymization_task_id = _id for update;
    if not found then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('account_anonymization_supervisor: account_anonymization_task %s does not exist', _id));
    end if;
    if exists (select 1 from accounts.account_anonymization_task_succeeded where account_anonymization_task_id = _id)
       or exists (select 1 from accounts.account_anonymization_task_failed where account_anonymization_task_id = _id) then
        return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('state', 'terminal'));
    end if;
    select * into _cfg from accounts.process_config where process = 'account_anonymization';

    if accounts.has_account_anonymization_succeeded_attempt(_id) then
        insert into accounts.account_anonymization_task_succeeded (account_anonymization_task_id) values (_id) on conflict do nothing;
        return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('state', 'anonymized'));
    end if;
    _failures := accounts.count_account_anonymization_failed_attempts(_id);
    if accounts.is_account_anonymization_stuck(_task.account_id) then
        insert into accounts.account_anonymization_task_failed (account_anonymization_task_id, error_message)
        values (_id, format('account %s not anonymized after %s failed attempts (max %s); last error: %s',
                            _task.account_id, _failures, _cfg.max_attempts,
                            coalesce((select f.error_message from accounts.account_anonymization_attempt a
                                      join accounts.account_anonymization_attempt_failed f using (account_anonymization_attempt_id)
                                      where a.account_anonymization_task_id = _id order by f.created_at desc limit 1), 'none')))
        on conflict do nothing;
        return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('state', 'gave_up'));
    end if;

    select max(f.created_at) into _last_fail from accounts.account_anonymization_attempt a
    join accounts.account_anonymization_attempt_failed f using (account_anonymization_attempt_id)
    where a.account_anonymization_task_id = _id;
    _next_try := coalesce(_last_fail, '-infinity') + queues.process_backoff(_failures, _cfg.backoff_base, _cfg.backoff_max);

    if _next_try <= now() then
        insert into accounts.account_anonymization_attempt (account_anonymization_task_id) values (_id)
        returning account_anonymization_attempt_id into _attempt_id;
        begin
            perform accounts.anonymize_account(_task.account_id);
            insert into accounts.account_anonymization_attempt_succeeded (account_anonymization_attempt_id) values (_attempt_id);
        exception when others then
            get stacked diagnostics _err = message_text;
            insert into accounts.account_anonymization_attempt_failed (account_anonymization_attempt_id, error_message)
            values (_attempt_id, left(_err, 8192));
        end;
        -- Look again at once: the next run records the terminal fact or backs off.
        _next_try := now();
    end if;

    perform queues.enqueue('db_function',
        jsonb_build_object('db_function', 'accounts.account_anonymization_supervisor', 'account_anonymization_task_id', _id),
        _next_try);
    return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object(
        'state', 'in_progress', 'attempt_id', _attempt_id, 'failures', _failures, 'next_check_at', _next_try));
end $$;

-- Grants --------------------------------------------------------------------------------------
revoke all on all tables in schema accounts from public;
revoke all on function
    accounts.has_account_anonymization_succeeded_attempt(bigint),
    accounts.count_account_anonymization_failed_attempts(bigint),
    accounts.count_account_anonymization_attempts(bigint),
    accounts.is_account_anonymization_stuck(bigint),
    accounts.has_account_flag(bigint, text),
    accounts.anonymize_account(bigint),
    accounts.kickoff_account_deletion(bigint, timestamptz),
    accounts.kickoff_account_anonymization(bigint),
    api.request_account_deletion(bigint),
    accounts.account_deletion_supervisor(jsonb),
    accounts.account_anonymization_supervisor(jsonb)
from public;
grant usage on schema accounts to worker_service_user;
grant execute on function
    accounts.account_deletion_supervisor(jsonb),
    accounts.account_anonymization_supervisor(jsonb)
to worker_service_user;
