-- Restarts failed account deletion _id (run n+1) for _reason, and what made it fail: each file
-- deletion of the account whose current run failed (files.retry_file_deletion) and a failed
-- anonymization (accounts.retry_account_anonymization), each with the reason
-- 'account deletion <id> retried: <reason>'; then runs its supervisor now, which waits for the
-- children's new runs. Raises, writing nothing, as retry_account_anonymization does. A child
-- restarted meanwhile by someone else (it is running by the time its lock is taken) is left as
-- it is. One transaction: a child's refusal undoes the whole retry.
create or replace function accounts.retry_account_deletion(_account_deletion_task_id bigint, _reason text) returns integer
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
revoke all on function accounts.retry_account_deletion(bigint, text) from public;
