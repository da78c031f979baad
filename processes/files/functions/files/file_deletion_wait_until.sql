-- When an instance waits until (its instances view: 'waiting' with this time, 'running' when
-- null): the agenda's time, while no attempt is outstanding and that time is ahead (a backoff, a
-- scheduled send, a delivery report awaited).
create or replace function files.file_deletion_wait_until(_file_deletion_task_id bigint) returns timestamptz
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select d.due_at from files.file_deletion_due d
    where d.file_deletion_task_id = _file_deletion_task_id and d.due_at > now()
      and not exists (select 1 from files.file_deletion_attempt a
                      where a.file_deletion_task_id = _file_deletion_task_id
                        and not exists (select 1 from files.file_deletion_attempt_succeeded s where s.file_deletion_attempt_id = a.file_deletion_attempt_id)
                        and not exists (select 1 from files.file_deletion_attempt_failed f where f.file_deletion_attempt_id = a.file_deletion_attempt_id))
$$;
revoke all on function files.file_deletion_wait_until(bigint) from public;
