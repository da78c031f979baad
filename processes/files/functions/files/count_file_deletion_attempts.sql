create or replace function files.count_file_deletion_attempts(_file_deletion_task_id bigint) returns integer
language plpgsql stable set search_path = pg_catalog, pg_temp set plan_cache_mode = force_custom_plan as $$
begin
    return (select count(*)::integer from files.file_deletion_attempt a
            where a.file_deletion_task_id = _file_deletion_task_id
              and a.file_deletion_attempt_id > coalesce((select max(z.last_attempt_id) from files.file_deletion_task_restarted z
                                                 where z.file_deletion_task_id = _file_deletion_task_id), 0));
end $$;
alter function files.count_file_deletion_attempts(bigint) reset plan_cache_mode;
alter function files.count_file_deletion_attempts(bigint) set enable_seqscan = off;
alter function files.count_file_deletion_attempts(bigint) set enable_hashjoin = off;
alter function files.count_file_deletion_attempts(bigint) set enable_mergejoin = off;
alter function files.count_file_deletion_attempts(bigint) reset plan_cache_mode;
alter function files.count_file_deletion_attempts(bigint) set enable_seqscan = off;
alter function files.count_file_deletion_attempts(bigint) set enable_hashjoin = off;
alter function files.count_file_deletion_attempts(bigint) set enable_mergejoin = off;
revoke all on function files.count_file_deletion_attempts(bigint) from public;
