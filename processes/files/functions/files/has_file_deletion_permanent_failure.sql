-- Facts helper: whether an attempt of the instance's current run failed permanently (such a
-- run ends at once). PL/pgSQL: the restart facts it reads may be created after it.
create or replace function files.has_file_deletion_permanent_failure(_file_deletion_task_id bigint) returns boolean
language plpgsql stable set search_path = pg_catalog, pg_temp as $$
begin
    return exists (select 1 from files.file_deletion_attempt a
                   join files.file_deletion_attempt_failed f using (file_deletion_attempt_id)
                   where a.file_deletion_task_id = _file_deletion_task_id and f.error_class = 'permanent'
                     and a.file_deletion_attempt_id > coalesce((select max(z.last_attempt_id) from files.file_deletion_task_restarted z
                                                        where z.file_deletion_task_id = _file_deletion_task_id), 0));
end $$;
revoke all on function files.has_file_deletion_permanent_failure(bigint) from public;
