-- Facts helper: whether a file's deletion can succeed no more: no success, and its attempts used
-- up or one failed permanently.
create or replace function files.is_file_deletion_stuck(_file_id bigint) returns boolean
language sql stable set search_path = pg_catalog, pg_temp as $$
    select exists (
        select 1 from files.file_deletion_task t
        where t.file_id = _file_id
          and not files.has_file_deletion_succeeded_attempt(t.file_deletion_task_id)
          and (files.count_file_deletion_failed_attempts(t.file_deletion_task_id)
                   >= (select max_attempts from files.process_config where process = 'file_deletion')
               or files.has_file_deletion_permanent_failure(t.file_deletion_task_id)))
$$;
revoke all on function files.is_file_deletion_stuck(bigint) from public;
