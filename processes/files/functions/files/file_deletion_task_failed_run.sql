create or replace function files.file_deletion_task_failed_run() returns trigger
language plpgsql set search_path = pg_catalog, pg_temp as $$
begin
    new.run := files.file_deletion_run(new.file_deletion_task_id);
    return new;
end $$;
revoke all on function files.file_deletion_task_failed_run() from public;
