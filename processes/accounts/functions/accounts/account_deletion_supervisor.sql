-- The account deletion's supervisor (the root process), run-aware: a failed fact of an earlier run
-- is not terminal; a child fails the account deletion only by the failed fact of the child's
-- current run, and a child restarted by hand is waited for.
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
revoke all on function accounts.account_deletion_supervisor(jsonb) from public;
grant execute on function accounts.account_deletion_supervisor(jsonb) to worker_service_user;
