-- The hard bound on a task's payload, in bytes as pg_column_size counts them: the constraint
-- task_payload_size's.
create or replace function internal.max_payload_bytes() returns integer
language sql immutable parallel safe as $$ select 8 * 1024 * 1024 $$;
revoke all on function internal.max_payload_bytes() from public;
