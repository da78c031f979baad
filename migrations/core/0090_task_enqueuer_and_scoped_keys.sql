-- Who enqueued a task, and keys that cannot collide (docs/sql.md, "Task status" and "Keys";
-- docs/security.md, "Reading a task's status").
--
-- 1. queues.task.enqueued_by: the role the enqueuing session acted as (its login user, or the
--    role it SET ROLE to), taken from the session when the row is inserted. A SECURITY DEFINER
--    insert function runs as its owner, so current_user there would name the owner; the session's
--    user and its role setting are the caller's own and cannot be set to a role it is not a
--    member of. The system's own tasks (schedule ticks, supervisor ticks) record NULL, and so do
--    the tasks enqueued before this migration: queues.get_task_status shows them to nobody.
-- 2. queues.task.key_scope: the scope of a task's idempotency and debounce keys, a db_function
--    task's function (set by the insert trigger internal.check_task_functions), '' otherwise. The
--    unique indexes of both keys include it, so a key of one function never meets another's.

-- A role's name, not its oid (regrole): a dump restored into another cluster names the role there
-- as its grants do, and a role dropped since names nobody.
alter table queues.task add column enqueued_by text;
-- Added without the default, then given it: existing rows keep NULL and the table is not rewritten.
alter table queues.task alter column enqueued_by
    set default coalesce(nullif(current_setting('role'), 'none'), session_user::text);
comment on column queues.task.enqueued_by is
    'The name of the role the enqueuing session acted as (session_user, or the role set by SET ROLE); NULL for the system''s own tasks (schedule and supervisor ticks) and for tasks enqueued before core/0090. queues.get_task_status shows a task to this role and its members (docs/security.md).';

alter table queues.task add column key_scope text not null default '';
comment on column queues.task.key_scope is
    'The scope of idempotency_key and debounce_key: a db_function task''s function (schema.name), set by the trigger task_functions_permitted; '''' for other task types.';

-- The tasks in flight keep their keys, now scoped by their function. Only rows with a key need
-- the scope; the old indexes made (task_type, key) unique, so the new ones, which add the scope,
-- hold at once.
update queues.task
set key_scope = payload ->> 'db_function'
where task_type = 'db_function' and jsonb_typeof(payload -> 'db_function') = 'string'
  and (idempotency_key is not null or debounce_key is not null);

create unique index task_idempotency_key_scoped_uidx on queues.task (task_type, key_scope, idempotency_key)
    where idempotency_key is not null;
drop index queues.task_idempotency_key_uidx;
alter index queues.task_idempotency_key_scoped_uidx rename to task_idempotency_key_uidx;

create unique index task_debounce_pending_scoped_uidx on queues.task (task_type, key_scope, debounce_key)
    where status = 'pending' and debounce_key is not null;
drop index queues.task_debounce_pending_uidx;
alter index queues.task_debounce_pending_scoped_uidx rename to task_debounce_pending_uidx;

-- The status getters, granted (as queues.grant_enqueue now grants them) to every role granted
-- queues.insert_task already.
\ir functions/queues/get_task_statuses.sql
\ir functions/queues/get_task_status.sql
do $$
declare
    _role regrole;
begin
    for _role in
        select distinct a.grantee::regrole
        from pg_catalog.pg_proc p, aclexplode(p.proacl) a
        where p.oid = 'queues.insert_task(text, jsonb, timestamptz, integer, text, integer, bigint[], text)'::regprocedure
          and a.privilege_type = 'EXECUTE' and a.grantee <> 0 and a.grantee <> p.proowner
    loop
        execute format('grant execute on function queues.get_task_status(bigint), queues.get_task_statuses(bigint[]) to %s', _role);
    end loop;
end $$;
