-- Kickoff: as before, but the new instance is made due instead of getting a supervisor task of
-- its own.
create or replace function files.kickoff_file_deletion(
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
        -- Already started: the supervisor is running.
        select t.file_deletion_task_id into file_deletion_task_id from files.file_deletion_task t where t.file_id = _file_id;
        return;
    end if;
    perform files.wake_file_deletion(file_deletion_task_id, coalesce(_scheduled_at, now()));
end $$;
revoke all on function files.kickoff_file_deletion(bigint, timestamp with time zone) from public;
