-- The limit that governs a task of _task_type with _payload, or NULL: for a db_function task,
-- the limit of its function if there is one, else the limit of its type.
create or replace function internal.limit_of(_task_type text, _payload jsonb) returns queues.task_limit
language sql stable set search_path = pg_catalog, pg_temp as $$
    select l.* from queues.task_limit l
    where l.task_type = _task_type
       or (_task_type = 'db_function' and l.task_type = 'db_function:' || (_payload ->> 'db_function'))
    order by l.task_type = _task_type  -- false first: the function's own limit
    limit 1
$$;
revoke all on function internal.limit_of(text, jsonb) from public;
