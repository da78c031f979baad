-- Kept for callers of earlier versions: wakes the supervisor for instance _id now.
create or replace function files.wake_file_deletion_supervisor(_file_deletion_task_id bigint, _attempt_id bigint) returns void
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    select files.wake_file_deletion(_file_deletion_task_id, now());
$$;
revoke all on function files.wake_file_deletion_supervisor(bigint, bigint) from public;
