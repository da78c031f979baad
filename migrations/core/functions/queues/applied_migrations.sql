-- What is applied, for a worker's readiness check: the worker role cannot read the bookkeeping
-- table itself.
create or replace function queues.applied_migrations()
returns table (migration_set text, version integer, checksum text)
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select m.migration_set, m.version, m.checksum from queues.schema_migration m order by 1, 2
$$;
revoke all on function queues.applied_migrations() from public;
grant execute on function queues.applied_migrations() to worker_service_user;
