-- The instance a supervisor task works on: {"db_function": "<schema>.<name>_supervisor",
-- "<name>_task_id": id} -> id. NULL for any other payload. Immutable (it reads only its
-- argument), so it can be indexed.
create or replace function internal.process_instance_id(_payload jsonb) returns bigint
language sql immutable parallel safe
return case
    when (_payload ->> (pg_catalog.substring(_payload ->> 'db_function',
                                             '^[a-z_][a-z0-9_$]*\.([a-z_][a-z0-9_$]*)_supervisor$') || '_task_id'))
         operator(pg_catalog.~) '^[0-9]{1,18}$'
    then (_payload ->> (pg_catalog.substring(_payload ->> 'db_function',
                                             '^[a-z_][a-z0-9_$]*\.([a-z_][a-z0-9_$]*)_supervisor$') || '_task_id'))::bigint
end;
revoke all on function internal.process_instance_id(jsonb) from public;
