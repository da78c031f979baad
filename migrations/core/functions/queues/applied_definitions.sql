-- The function and view files applied (queues.schema_definition; docs/design.md, "How the SQL is
-- laid out"): for a worker's readiness check (taskorch.CheckMigrations), which runs as
-- worker_service_user and may not read the table.
create or replace function queues.applied_definitions()
returns table (migration_set text, path text, version integer, checksum text, migrations integer)
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select d.migration_set, d.path, d.version, d.checksum, d.migrations from queues.schema_definition d order by 1, 2
$$;
revoke all on function queues.applied_definitions() from public;
grant execute on function queues.applied_definitions() to worker_service_user;
