-- When the next supervisor run of an instance will happen: the earliest pending db_function
-- task naming <_db_function> and the instance, when it is in the future. NULL when a run is due
-- now or running (the instance is being worked on) or none is scheduled.
create or replace function queues.process_next_run(_db_function text, _instance_id bigint) returns timestamptz
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select case when bool_or(t.status = 'running' or t.run_at <= now()) then null else min(t.run_at) end
    from queues.task t
    where t.task_type = 'db_function' and t.status in ('pending', 'running')
      and t.payload ->> 'db_function' = _db_function
      and internal.process_instance_id(t.payload) = _instance_id
$$;
revoke all on function queues.process_next_run(text, bigint) from public;
