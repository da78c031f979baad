-- Retry a failed account deletion by hand (docs/processes.md, "Retrying a failed process").
--
--   accounts.retry_account_deletion(id, reason)       restarts a failed account deletion: a
--       restart fact, then what made it fail restarted (each file deletion of the account whose
--       current run failed, through files.retry_file_deletion; a failed anonymization), then
--       its supervisor woken; registered for queues.retry_process('accounts.account_deletion', ...)
--   accounts.retry_account_anonymization(id, reason)  restarts a failed anonymization (new
--       attempts, a new attempt budget); registered for 'accounts.account_anonymization'
--
-- The same run model as the channel processes (files/0005, comms/0008): an instance runs in
-- runs, run 1 from its kickoff, run n+1 from its n-th restart; a restart is a fact
-- (<name>_task_restarted); <name>_task_failed is keyed by (id, run), a trigger filling run; a
-- failed fact of an earlier run stays and is not terminal. The supervisors, the facts helpers,
-- the wait_until functions and the instances views count the current run only, and the account
-- deletion supervisor reads each child's current run: a file deletion or an anonymization
-- restarted by hand is running again, not failed.
--
-- The account deletion supervisor now fails only on a child's terminal failed fact (of its
-- current run), no longer on is_file_deletion_stuck / is_account_anonymization_stuck alone:
-- a child stuck but not yet failed records its failed fact at its supervisor's next run, and a
-- retry of the account deletion then finds it failed and restarts it.

-- Account deletion: runs ------------------------------------------------------------------------

-- Fact: an operator restarted a failed account deletion, starting run `run`, and why. It has no
-- attempts of its own (its children have them), so no last_attempt_id.
create table accounts.account_deletion_task_restarted (
    account_deletion_task_id bigint not null references accounts.account_deletion_task,
    run          integer not null check (run >= 2),
    reason       text not null check (length(btrim(reason)) between 1 and 2000),
    restarted_at timestamptz not null default now(),
    restarted_by text not null default session_user,
    primary key (account_deletion_task_id, run)
);
create trigger account_deletion_task_restarted_append_only before update on accounts.account_deletion_task_restarted
    for each statement execute function internal.refuse_fact_update();

-- The current run of an account deletion: 1, or the run its last restart started.
create function accounts.account_deletion_run(_account_deletion_task_id bigint) returns integer
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
begin
    return (select coalesce(max(r.run), 1) from accounts.account_deletion_task_restarted r
            where r.account_deletion_task_id = _account_deletion_task_id);
end $$;

-- One terminal failure per run (rows kept: each is run 1), run set on insert.
alter table accounts.account_deletion_task_failed add column run integer not null default 1;
alter table accounts.account_deletion_task_failed drop constraint account_deletion_task_failed_pkey;
alter table accounts.account_deletion_task_failed add primary key (account_deletion_task_id, run);
create function accounts.account_deletion_task_failed_run() returns trigger
language plpgsql set search_path = pg_catalog, pg_temp as $$
begin
    new.run := accounts.account_deletion_run(new.account_deletion_task_id);
    return new;
end $$;
create trigger account_deletion_task_failed_run before insert on accounts.account_deletion_task_failed
    for each row execute function accounts.account_deletion_task_failed_run();

-- Account anonymization: runs -------------------------------------------------------------------

-- Fact: an operator (or a retry of the account deletion) restarted a failed anonymization,
-- starting run `run`. last_attempt_id is the newest attempt of the runs before: the attempts
-- after it are this run's.
create table accounts.account_anonymization_task_restarted (
    account_anonymization_task_id bigint not null references accounts.account_anonymization_task,
    run             integer not null check (run >= 2),
    reason          text not null check (length(btrim(reason)) between 1 and 2000),
    last_attempt_id bigint,
    restarted_at    timestamptz not null default now(),
    restarted_by    text not null default session_user,
    primary key (account_anonymization_task_id, run)
);
create trigger account_anonymization_task_restarted_append_only before update on accounts.account_anonymization_task_restarted
    for each statement execute function internal.refuse_fact_update();

-- The current run of an anonymization: 1, or the run its last restart started.
create function accounts.account_anonymization_run(_account_anonymization_task_id bigint) returns integer
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
begin
    return (select coalesce(max(r.run), 1) from accounts.account_anonymization_task_restarted r
            where r.account_anonymization_task_id = _account_anonymization_task_id);
end $$;

alter table accounts.account_anonymization_task_failed add column run integer not null default 1;
alter table accounts.account_anonymization_task_failed drop constraint account_anonymization_task_failed_pkey;
alter table accounts.account_anonymization_task_failed add primary key (account_anonymization_task_id, run);
create function accounts.account_anonymization_task_failed_run() returns trigger
language plpgsql set search_path = pg_catalog, pg_temp as $$
begin
    new.run := accounts.account_anonymization_run(new.account_anonymization_task_id);
    return new;
end $$;
create trigger account_anonymization_task_failed_run before insert on accounts.account_anonymization_task_failed
    for each row execute function accounts.account_anonymization_task_failed_run();

-- The facts helpers count the current run's attempts (is_account_anonymization_stuck with them):
-- same names, arguments and answers for an anonymization never restarted.
create or replace function accounts.count_account_anonymization_failed_attempts(_account_anonymization_task_id bigint) returns integer
language plpgsql stable set search_path = pg_catalog, pg_temp as $$
begin
    return (select count(*)::integer from accounts.account_anonymization_attempt a
            join accounts.account_anonymization_attempt_failed f using (account_anonymization_attempt_id)
            where a.account_anonymization_task_id = _account_anonymization_task_id
              and a.account_anonymization_attempt_id > coalesce((select max(z.last_attempt_id) from accounts.account_anonymization_task_restarted z
                                                                 where z.account_anonymization_task_id = _account_anonymization_task_id), 0));
end $$;

create or replace function accounts.count_account_anonymization_attempts(_account_anonymization_task_id bigint) returns integer
language plpgsql stable set search_path = pg_catalog, pg_temp as $$
begin
    return (select count(*)::integer from accounts.account_anonymization_attempt a
            where a.account_anonymization_task_id = _account_anonymization_task_id
              and a.account_anonymization_attempt_id > coalesce((select max(z.last_attempt_id) from accounts.account_anonymization_task_restarted z
                                                                 where z.account_anonymization_task_id = _account_anonymization_task_id), 0));
end $$;

-- Supervisors, run-aware ------------------------------------------------------------------------

-- The root (0001), run-aware: a failed fact of an earlier run is not terminal; a child fails the
-- account deletion only by the failed fact of the child's current run, and a child restarted by
-- hand is waited for.
create or replace function accounts.account_deletion_supervisor(_payload jsonb) returns jsonb
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
       or exists (select 1 from accounts.account_deletion_task_failed
                  where account_deletion_task_id = _id and run = accounts.account_deletion_run(_id)) then
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

    -- A file deletion whose current run failed.
    select f.file_id, f.bucket, f.object_key, tf.error_message into _stuck
    from files.file f
    join files.file_deletion_task d using (file_id)
    join files.file_deletion_task_failed tf
      on tf.file_deletion_task_id = d.file_deletion_task_id and tf.run = files.file_deletion_run(d.file_deletion_task_id)
    where f.owner_account_id = _task.account_id
    order by f.file_id limit 1;
    if found then
        insert into accounts.account_deletion_task_failed (account_deletion_task_id, error_message)
        values (_id, format('account %s: file deletion stuck for file %s (%s/%s): %s', _task.account_id,
                            _stuck.file_id, _stuck.bucket, _stuck.object_key, _stuck.error_message))
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
        select error_message into _k from accounts.account_anonymization_task_failed
        where account_anonymization_task_id = _anon.account_anonymization_task_id
          and run = accounts.account_anonymization_run(_anon.account_anonymization_task_id);
        if found then
            insert into accounts.account_deletion_task_failed (account_deletion_task_id, error_message)
            values (_id, format('account %s: account anonymization stuck: %s', _task.account_id, _k.error_message))
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

-- The anonymization (0001), run-aware: a failed fact of an earlier run is not terminal; the
-- attempt budget, the backoff and the give-up message count the current run's attempts only.
create or replace function accounts.account_anonymization_supervisor(_payload jsonb) returns jsonb
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _id         bigint;
    _task       accounts.account_anonymization_task;
    _cfg        accounts.process_config;
    _since      bigint;
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
       or exists (select 1 from accounts.account_anonymization_task_failed
                  where account_anonymization_task_id = _id and run = accounts.account_anonymization_run(_id)) then
        return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('state', 'terminal'));
    end if;
    select * into _cfg from accounts.process_config where process = 'account_anonymization';
    -- The current run's attempts are those after the last restart's last_attempt_id.
    _since := coalesce((select max(z.last_attempt_id) from accounts.account_anonymization_task_restarted z
                        where z.account_anonymization_task_id = _id), 0);

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
                                      where a.account_anonymization_task_id = _id and a.account_anonymization_attempt_id > _since
                                      order by f.created_at desc, f.account_anonymization_attempt_id desc limit 1), 'none')))
        on conflict do nothing;
        return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('state', 'gave_up'));
    end if;

    select max(f.created_at) into _last_fail from accounts.account_anonymization_attempt a
    join accounts.account_anonymization_attempt_failed f using (account_anonymization_attempt_id)
    where a.account_anonymization_task_id = _id and a.account_anonymization_attempt_id > _since;
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

-- Waiting, run-aware (0002): a child whose current run has no terminal fact is still running.
create or replace function accounts.account_deletion_wait_until(_account_deletion_task_id bigint) returns timestamptz
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select case
        when exists (select 1 from accounts.account_deletion_task ad
                     join files.file fl on fl.owner_account_id = ad.account_id
                     join files.file_deletion_task d on d.file_id = fl.file_id
                     where ad.account_deletion_task_id = _account_deletion_task_id
                       and not exists (select 1 from files.file_deletion_task_succeeded s where s.file_deletion_task_id = d.file_deletion_task_id)
                       and not exists (select 1 from files.file_deletion_task_failed f where f.file_deletion_task_id = d.file_deletion_task_id
                                         and f.run = files.file_deletion_run(d.file_deletion_task_id)))
          or exists (select 1 from accounts.account_deletion_task ad
                     join accounts.account_anonymization_task n on n.account_id = ad.account_id
                     where ad.account_deletion_task_id = _account_deletion_task_id
                       and not exists (select 1 from accounts.account_anonymization_task_succeeded s where s.account_anonymization_task_id = n.account_anonymization_task_id)
                       and not exists (select 1 from accounts.account_anonymization_task_failed f where f.account_anonymization_task_id = n.account_anonymization_task_id
                                         and f.run = accounts.account_anonymization_run(n.account_anonymization_task_id)))
        then null
        else queues.process_next_run('accounts.account_deletion_supervisor', _account_deletion_task_id)
    end
$$;

-- Retry by hand ---------------------------------------------------------------------------------

-- Restarts failed anonymization _id (run n+1) for _reason and runs its supervisor now, so it
-- makes a new attempt with a new attempt budget. Raises, writing nothing, when the reason is
-- empty or over 2000 characters (invalid_parameter_value), the instance does not exist
-- (no_data_found), or it is not failed (object_not_in_prerequisite_state). The root row's lock
-- orders two retries at once; the second finds the instance running. Called through
-- queues.retry_process, and by accounts.retry_account_deletion. It does not restart the
-- account deletion that failed on it: retry that one (it then waits for this run).
create function accounts.retry_account_anonymization(_account_anonymization_task_id bigint, _reason text) returns integer
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _run  integer;
    _last bigint;
begin
    if _reason is null or btrim(_reason) = '' then
        raise exception 'retry_account_anonymization: a reason is required (it is recorded with the restart)'
            using errcode = 'invalid_parameter_value';
    end if;
    if length(btrim(_reason)) > 2000 then
        raise exception 'retry_account_anonymization: the reason must be at most 2000 characters, got %', length(btrim(_reason))
            using errcode = 'invalid_parameter_value';
    end if;
    perform 1 from accounts.account_anonymization_task where account_anonymization_task_id = _account_anonymization_task_id for update;
    if not found then
        raise exception 'retry_account_anonymization: accounts.account_anonymization has no instance %', coalesce(_account_anonymization_task_id::text, 'NULL')
            using errcode = 'no_data_found';
    end if;
    if exists (select 1 from accounts.account_anonymization_task_succeeded where account_anonymization_task_id = _account_anonymization_task_id) then
        raise exception 'retry_account_anonymization: accounts.account_anonymization % succeeded; only a failed instance can be retried', _account_anonymization_task_id
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    _run := accounts.account_anonymization_run(_account_anonymization_task_id);
    if not exists (select 1 from accounts.account_anonymization_task_failed
                   where account_anonymization_task_id = _account_anonymization_task_id and run = _run) then
        raise exception 'retry_account_anonymization: accounts.account_anonymization % is running, not failed; only a failed instance can be retried', _account_anonymization_task_id
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    select max(account_anonymization_attempt_id) into _last from accounts.account_anonymization_attempt
    where account_anonymization_task_id = _account_anonymization_task_id;
    insert into accounts.account_anonymization_task_restarted (account_anonymization_task_id, run, reason, last_attempt_id)
    values (_account_anonymization_task_id, _run + 1, btrim(_reason), _last);
    perform queues.enqueue('db_function',
        jsonb_build_object('db_function', 'accounts.account_anonymization_supervisor',
                           'account_anonymization_task_id', _account_anonymization_task_id));
    return _run + 1;
end $$;

-- Restarts failed account deletion _id (run n+1) for _reason, and what made it fail: each file
-- deletion of the account whose current run failed (files.retry_file_deletion) and a failed
-- anonymization (accounts.retry_account_anonymization), each with the reason
-- 'account deletion <id> retried: <reason>'; then runs its supervisor now, which waits for the
-- children's new runs. Raises, writing nothing, as retry_account_anonymization does. A child
-- restarted meanwhile by someone else (it is running by the time its lock is taken) is left as
-- it is. One transaction: a child's refusal undoes the whole retry.
create function accounts.retry_account_deletion(_account_deletion_task_id bigint, _reason text) returns integer
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _task accounts.account_deletion_task;
    _run  integer;
    _why  text;
    _k    record;
begin
    if _reason is null or btrim(_reason) = '' then
        raise exception 'retry_account_deletion: a reason is required (it is recorded with the restart)'
            using errcode = 'invalid_parameter_value';
    end if;
    if length(btrim(_reason)) > 2000 then
        raise exception 'retry_account_deletion: the reason must be at most 2000 characters, got %', length(btrim(_reason))
            using errcode = 'invalid_parameter_value';
    end if;
    select * into _task from accounts.account_deletion_task where account_deletion_task_id = _account_deletion_task_id for update;
    if not found then
        raise exception 'retry_account_deletion: accounts.account_deletion has no instance %', coalesce(_account_deletion_task_id::text, 'NULL')
            using errcode = 'no_data_found';
    end if;
    if exists (select 1 from accounts.account_deletion_task_succeeded where account_deletion_task_id = _account_deletion_task_id) then
        raise exception 'retry_account_deletion: accounts.account_deletion % succeeded; only a failed instance can be retried', _account_deletion_task_id
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    _run := accounts.account_deletion_run(_account_deletion_task_id);
    if not exists (select 1 from accounts.account_deletion_task_failed
                   where account_deletion_task_id = _account_deletion_task_id and run = _run) then
        raise exception 'retry_account_deletion: accounts.account_deletion % is running, not failed; only a failed instance can be retried', _account_deletion_task_id
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    insert into accounts.account_deletion_task_restarted (account_deletion_task_id, run, reason)
    values (_account_deletion_task_id, _run + 1, btrim(_reason));
    _why := left(format('account deletion %s retried: %s', _account_deletion_task_id, btrim(_reason)), 2000);

    -- The file deletions whose current run failed. Each is locked, then checked again (a
    -- statement of its own, so it sees a restart committed while it waited).
    for _k in
        select d.file_deletion_task_id from files.file f
        join files.file_deletion_task d using (file_id)
        where f.owner_account_id = _task.account_id
          and exists (select 1 from files.file_deletion_task_failed tf
                      where tf.file_deletion_task_id = d.file_deletion_task_id and tf.run = files.file_deletion_run(d.file_deletion_task_id))
        order by d.file_deletion_task_id
    loop
        perform 1 from files.file_deletion_task where file_deletion_task_id = _k.file_deletion_task_id for update;
        if exists (select 1 from files.file_deletion_task_failed tf
                   where tf.file_deletion_task_id = _k.file_deletion_task_id and tf.run = files.file_deletion_run(_k.file_deletion_task_id)) then
            perform files.retry_file_deletion(_k.file_deletion_task_id, _why);
        end if;
    end loop;

    -- The anonymization, when its current run failed.
    for _k in
        select n.account_anonymization_task_id from accounts.account_anonymization_task n
        where n.account_id = _task.account_id
    loop
        perform 1 from accounts.account_anonymization_task where account_anonymization_task_id = _k.account_anonymization_task_id for update;
        if exists (select 1 from accounts.account_anonymization_task_failed tf
                   where tf.account_anonymization_task_id = _k.account_anonymization_task_id
                     and tf.run = accounts.account_anonymization_run(_k.account_anonymization_task_id)) then
            perform accounts.retry_account_anonymization(_k.account_anonymization_task_id, _why);
        end if;
    end loop;

    -- Its supervisor chain ended with the failure: start it again, now.
    perform queues.enqueue('db_function',
        jsonb_build_object('db_function', 'accounts.account_deletion_supervisor', 'account_deletion_task_id', _account_deletion_task_id));
    return _run + 1;
end $$;

-- The instances views, run-aware ---------------------------------------------------------------

-- accounts.account_deletion (0002): a failed fact of a run that was restarted is not terminal
-- (the instance is running or waiting again).
create or replace view accounts.account_deletion_instances as
select t.account_deletion_task_id as instance_id, 'succeeded'::text as state, null::timestamptz as wait_until,
       null::integer as attempts,
       t.created_at as started_at, s.created_at as ended_at, null::text as error,
       null::text as parent_process, null::bigint as parent_id
from accounts.account_deletion_task_succeeded s
join accounts.account_deletion_task t on t.account_deletion_task_id = s.account_deletion_task_id
union all
select t.account_deletion_task_id, 'failed', null,
       null::integer,
       t.created_at, f.created_at, f.error_message, null::text, null::bigint
from accounts.account_deletion_task_failed f
join accounts.account_deletion_task t on t.account_deletion_task_id = f.account_deletion_task_id
where not exists (select 1 from accounts.account_deletion_task_restarted z
                  where z.account_deletion_task_id = f.account_deletion_task_id and z.run > f.run)
union all
select t.account_deletion_task_id, 'waiting', w.wait_until,
       null::integer,
       t.created_at, null, null, null::text, null::bigint
from accounts.account_deletion_task t
cross join lateral (select accounts.account_deletion_wait_until(t.account_deletion_task_id) as wait_until
                    where not exists (select 1 from accounts.account_deletion_task_succeeded s where s.account_deletion_task_id = t.account_deletion_task_id)
                      and not exists (select 1 from accounts.account_deletion_task_failed f where f.account_deletion_task_id = t.account_deletion_task_id
                                        and not exists (select 1 from accounts.account_deletion_task_restarted z
                                                        where z.account_deletion_task_id = f.account_deletion_task_id and z.run > f.run))
                    offset 0) w
where w.wait_until is not null
union all
select t.account_deletion_task_id, 'running', null,
       null::integer,
       t.created_at, null, null, null::text, null::bigint
from accounts.account_deletion_task t
cross join lateral (select accounts.account_deletion_wait_until(t.account_deletion_task_id) as wait_until
                    where not exists (select 1 from accounts.account_deletion_task_succeeded s where s.account_deletion_task_id = t.account_deletion_task_id)
                      and not exists (select 1 from accounts.account_deletion_task_failed f where f.account_deletion_task_id = t.account_deletion_task_id
                                        and not exists (select 1 from accounts.account_deletion_task_restarted z
                                                        where z.account_deletion_task_id = f.account_deletion_task_id and z.run > f.run))
                    offset 0) w
where w.wait_until is null;

-- accounts.account_anonymization (0002), the same way; attempts count every run's.
create or replace view accounts.account_anonymization_instances as
select t.account_anonymization_task_id as instance_id, 'succeeded'::text as state, null::timestamptz as wait_until,
       (select count(*)::integer from accounts.account_anonymization_attempt a where a.account_anonymization_task_id = t.account_anonymization_task_id) as attempts,
       t.created_at as started_at, s.created_at as ended_at, null::text as error,
       case when ad.account_deletion_task_id is not null then 'accounts.account_deletion' end as parent_process, ad.account_deletion_task_id as parent_id
from accounts.account_anonymization_task_succeeded s
join accounts.account_anonymization_task t on t.account_anonymization_task_id = s.account_anonymization_task_id
left join accounts.account_deletion_task ad on ad.account_id = t.account_id
union all
select t.account_anonymization_task_id, 'failed', null,
       (select count(*)::integer from accounts.account_anonymization_attempt a where a.account_anonymization_task_id = t.account_anonymization_task_id),
       t.created_at, f.created_at, f.error_message, case when ad.account_deletion_task_id is not null then 'accounts.account_deletion' end, ad.account_deletion_task_id
from accounts.account_anonymization_task_failed f
join accounts.account_anonymization_task t on t.account_anonymization_task_id = f.account_anonymization_task_id
left join accounts.account_deletion_task ad on ad.account_id = t.account_id
where not exists (select 1 from accounts.account_anonymization_task_restarted z
                  where z.account_anonymization_task_id = f.account_anonymization_task_id and z.run > f.run)
union all
select t.account_anonymization_task_id, 'waiting', w.wait_until,
       (select count(*)::integer from accounts.account_anonymization_attempt a where a.account_anonymization_task_id = t.account_anonymization_task_id),
       t.created_at, null, null, case when ad.account_deletion_task_id is not null then 'accounts.account_deletion' end, ad.account_deletion_task_id
from accounts.account_anonymization_task t
cross join lateral (select accounts.account_anonymization_wait_until(t.account_anonymization_task_id) as wait_until
                    where not exists (select 1 from accounts.account_anonymization_task_succeeded s where s.account_anonymization_task_id = t.account_anonymization_task_id)
                      and not exists (select 1 from accounts.account_anonymization_task_failed f where f.account_anonymization_task_id = t.account_anonymization_task_id
                                        and not exists (select 1 from accounts.account_anonymization_task_restarted z
                                                        where z.account_anonymization_task_id = f.account_anonymization_task_id and z.run > f.run))
                    offset 0) w
left join accounts.account_deletion_task ad on ad.account_id = t.account_id
where w.wait_until is not null
union all
select t.account_anonymization_task_id, 'running', null,
       (select count(*)::integer from accounts.account_anonymization_attempt a where a.account_anonymization_task_id = t.account_anonymization_task_id),
       t.created_at, null, null, case when ad.account_deletion_task_id is not null then 'accounts.account_deletion' end, ad.account_deletion_task_id
from accounts.account_anonymization_task t
cross join lateral (select accounts.account_anonymization_wait_until(t.account_anonymization_task_id) as wait_until
                    where not exists (select 1 from accounts.account_anonymization_task_succeeded s where s.account_anonymization_task_id = t.account_anonymization_task_id)
                      and not exists (select 1 from accounts.account_anonymization_task_failed f where f.account_anonymization_task_id = t.account_anonymization_task_id
                                        and not exists (select 1 from accounts.account_anonymization_task_restarted z
                                                        where z.account_anonymization_task_id = f.account_anonymization_task_id and z.run > f.run))
                    offset 0) w
left join accounts.account_deletion_task ad on ad.account_id = t.account_id
where w.wait_until is null;

select queues.register_process_retry('accounts', 'account_deletion', 'retry_account_deletion');
select queues.register_process_retry('accounts', 'account_anonymization', 'retry_account_anonymization');

-- Grants: nothing for PUBLIC, nothing for the worker. An operator retries as the schema's owner
-- (queues.retry_process: the CLI, the dashboard).
revoke all on accounts.account_deletion_task_restarted, accounts.account_anonymization_task_restarted,
    accounts.account_deletion_instances, accounts.account_anonymization_instances from public;
revoke all on function
    accounts.account_deletion_run(bigint),
    accounts.account_deletion_task_failed_run(),
    accounts.account_anonymization_run(bigint),
    accounts.account_anonymization_task_failed_run(),
    accounts.retry_account_anonymization(bigint, text),
    accounts.retry_account_deletion(bigint, text)
from public;
