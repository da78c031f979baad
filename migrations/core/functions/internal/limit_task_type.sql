-- The task type a limit's tasks have: db_function for 'db_function:<schema.function>', else the
-- limit's name.
create or replace function internal.limit_task_type(_limit_name text) returns text
language sql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
    select case when _limit_name like 'db_function:%' then 'db_function' else _limit_name end
$$;
revoke all on function internal.limit_task_type(text) from public;
