-- The table's own check: a task that names a function needs a permit for it, given in the same
-- transaction. Fires only for the task types whose payload names functions. On queues.task it
-- also sets key_scope, the scope of the task's idempotency and debounce keys: a db_function
-- task's function, '' for the other types.
create or replace function internal.check_task_functions() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _names text[];
    _missing text;
begin
    _names := internal.task_function_names('enqueue', new.task_type, new.payload);
    -- A db_function task's keys are its function's (queues.task.key_scope, core/0090).
    if tg_table_name = 'task' then
        new.key_scope := case when new.task_type = 'db_function' then _names[1] else '' end;
    end if;
    if cardinality(_names) = 0 then
        return new;
    end if;
    select n into _missing
    from unnest(_names) n
    where not exists (select from queues.enqueue_permit p
                      where p.permit_xid = pg_current_xact_id() and n = any (p.names))
    limit 1;
    if found then
        raise exception 'enqueue: the % task names function %, which no role allowed to execute it asked to enqueue in this transaction',
            new.task_type, to_jsonb(left(_missing, 130))::text
            using errcode = 'insufficient_privilege',
                  hint = 'Enqueue through queues.enqueue and its siblings, whose caller must be allowed to execute every function its tasks name (docs/security.md, "Who may name a function").';
    end if;
    return new;
end $$;
revoke all on function internal.check_task_functions() from public;
