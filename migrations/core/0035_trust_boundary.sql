-- The trust boundary (docs/security.md, "Who may name a function" and "The audit").
--
-- 1. Every time the API takes is finite, and within the years 1 to 9999. `infinity` and
--    `-infinity` are valid timestamptz values; a task enqueued at `-infinity` was claimed first and
--    then could not be read by the worker, which lost the whole claim with it, and a year such as
--    4713 BC broke every client that reads dates as ISO 8601 (Go's JSON among them). The enqueue
--    functions, snooze_task and add_schedule refuse them (22023, naming the argument), and CHECK
--    constraints on queues.task and queues.schedule refuse them whatever path writes the row.
--    Rows already holding one are repaired first: a task due before year 1 is due at its enqueue
--    time, one due after 9999 (it would never run) is failed with a message that says why; a
--    schedule's out-of-range next run is recomputed by the leader.
--
-- 2. A task may name a function only if the role enqueueing it may execute that function itself.
--    A db_function task's function and a channel task's handlers run with the worker's rights, and
--    the worker may execute every supervisor and handler: before this, a role allowed to enqueue
--    could have the worker record an "e-mail sent" fact for an e-mail never sent. Now:
--    - the enqueue functions are SECURITY INVOKER: they run as their caller, and first ask for a
--      *permit* for the functions their tasks name (queues.permit_task_functions), inserting into
--      queues.enqueue_permit as the caller. That table's trigger runs as the caller too, and refuses
--      (42501) a function the caller may not execute;
--    - they then call the functions that insert the tasks (queues.insert_task, insert_tasks,
--      insert_debounced_task; SECURITY DEFINER, what the enqueue functions were before), and a
--      trigger on queues.task refuses a task naming a function for which no permit was given in
--      the same transaction; the insert functions then drop the transaction's permits;
--    - a kickoff or a supervisor is SECURITY DEFINER: it enqueues as its owner, who may execute the
--      process's functions; an application calling queues.enqueue directly enqueues as itself.
--    Schedules get the same check when they are added (queues.add_schedule, put_schedule).
--    Roles that could enqueue keep their rights: they are granted what the invoker functions call.
--    queues.grant_enqueue(role) grants all of it to a new role.
--
-- 3. A function named by a task must exist and be well formed when the task is enqueued: a
--    malformed name or a missing function is refused at once (22023, 42883) instead of failing the
--    task later.

-- 1. Finite times ------------------------------------------------------------------------------
-- (internal.time_in_range and internal.check_finite; the enqueue functions, snooze_task and
-- add_schedule check their times with them.) The repair and the constraints need the first now.
\ir functions/internal/time_in_range.sql

-- Repair rows that hold a time out of range, then constrain.
insert into queues.error (task_id, error_message, context)
select t.task_id,
       format('task scheduled at %s can never run: failed by the upgrade to finite times (core/0035)', t.run_at),
       jsonb_build_object('operation', 'migrate', 'reason', 'infinite_time', 'run_at', t.run_at::text)
from queues.task t
where t.status = 'pending' and t.run_at >= '10000-01-01 00:00:00+00';

update queues.task t
set status = 'failed', failed_at = now(),
    last_error = format('task scheduled at %s can never run: failed by the upgrade to finite times (core/0035)', t.run_at),
    run_at = case when internal.time_in_range(t.enqueued_at) then t.enqueued_at else now() end,
    scheduled_at = case when internal.time_in_range(t.scheduled_at) then t.scheduled_at else now() end
where t.status = 'pending' and t.run_at >= '10000-01-01 00:00:00+00';

update queues.task t
set enqueued_at = case when internal.time_in_range(t.enqueued_at) then t.enqueued_at else now() end,
    scheduled_at = case when internal.time_in_range(t.scheduled_at) then t.scheduled_at
                        when internal.time_in_range(t.enqueued_at) then t.enqueued_at else now() end,
    run_at = case when internal.time_in_range(t.run_at) then t.run_at
                  when internal.time_in_range(t.enqueued_at) then t.enqueued_at else now() end,
    lease_expires_at = case when internal.time_in_range(t.lease_expires_at) then t.lease_expires_at else now() end,
    claimed_at = case when internal.time_in_range(t.claimed_at) then t.claimed_at else now() end,
    completed_at = case when internal.time_in_range(t.completed_at) then t.completed_at else now() end,
    failed_at = case when internal.time_in_range(t.failed_at) then t.failed_at else now() end,
    dead_at = case when internal.time_in_range(t.dead_at) then t.dead_at else now() end,
    cancelled_at = case when internal.time_in_range(t.cancelled_at) then t.cancelled_at else now() end,
    dispatched_at = case when internal.time_in_range(t.dispatched_at) then t.dispatched_at else now() end
where not (internal.time_in_range(t.enqueued_at) and internal.time_in_range(t.scheduled_at) and internal.time_in_range(t.run_at)
           and internal.time_in_range(t.lease_expires_at) and internal.time_in_range(t.claimed_at)
           and internal.time_in_range(t.completed_at) and internal.time_in_range(t.failed_at)
           and internal.time_in_range(t.dead_at) and internal.time_in_range(t.cancelled_at)
           and internal.time_in_range(t.dispatched_at));

alter table queues.task add constraint task_times_finite check (
    internal.time_in_range(enqueued_at) and internal.time_in_range(scheduled_at) and internal.time_in_range(run_at)
    and internal.time_in_range(lease_expires_at) and internal.time_in_range(claimed_at)
    and internal.time_in_range(completed_at) and internal.time_in_range(failed_at)
    and internal.time_in_range(dead_at) and internal.time_in_range(cancelled_at)
    and internal.time_in_range(dispatched_at)
) not valid;
alter table queues.task validate constraint task_times_finite;

update queues.schedule
set next_run_at = case when internal.time_in_range(next_run_at) then next_run_at end,
    last_tick_at = case when internal.time_in_range(last_tick_at) then last_tick_at end,
    last_enqueued_at = case when internal.time_in_range(last_enqueued_at) then last_enqueued_at end
where not (internal.time_in_range(next_run_at) and internal.time_in_range(last_tick_at)
           and internal.time_in_range(last_enqueued_at));
alter table queues.schedule add constraint schedule_times_finite check (
    internal.time_in_range(created_at) and internal.time_in_range(updated_at) and internal.time_in_range(next_run_at)
    and internal.time_in_range(last_tick_at) and internal.time_in_range(last_enqueued_at)
);

-- 2. Permits -----------------------------------------------------------------------------------

-- One row per call of an enqueue function whose tasks name functions: the names, checked against
-- the caller's rights by the insert trigger, valid for the rest of the transaction until the task
-- insert that uses them drops them. Unlogged: a permit outlives no transaction, so none needs to
-- survive a crash.
create unlogged table queues.enqueue_permit (
    permit_xid xid8 not null,
    names text[] not null,
    granted_to name not null,
    created_at timestamptz not null default clock_timestamp()
);
create index enqueue_permit_xid_idx on queues.enqueue_permit (permit_xid);
comment on table queues.enqueue_permit is
    'Functions a task may name in the current transaction, each checked against the rights of the role that asked (docs/security.md, "Who may name a function"). Written by queues.permit_task_functions, read and emptied by the task inserts.';
revoke all on table queues.enqueue_permit from public;

-- The permit's trigger (internal.check_enqueue_permit, with internal.task_function_names)
-- refuses a function the caller may not execute.
\ir functions/internal/check_enqueue_permit.sql
create trigger enqueue_permit_check before insert on queues.enqueue_permit
for each row execute function internal.check_enqueue_permit();

-- A task, or a schedule, naming a function needs a permit for it given in its transaction
-- (internal.check_task_functions).
\ir functions/internal/check_task_functions.sql
create trigger task_functions_permitted
before insert or update of task_type, payload on queues.task
for each row
when (new.task_type in ('db_function', 'email', 'sms', 'file_delete'))
execute function internal.check_task_functions();

create trigger schedule_functions_permitted
before insert or update of task_type, payload on queues.schedule
for each row
when (new.task_type in ('db_function', 'email', 'sms', 'file_delete'))
execute function internal.check_task_functions();

-- The insert functions (queues.insert_task, insert_tasks, insert_debounced_task, put_schedule):
-- what the enqueue functions were, under new names (their grants follow them), with finite
-- times. The enqueue functions of the old names call them, as SECURITY INVOKER, after asking for
-- a permit (queues.permit_task_functions, internal.drop_enqueue_permits).
alter function queues.enqueue_with_result(text, jsonb, timestamptz, integer, text, integer) rename to insert_task;
alter function queues.enqueue_many_with_result(text[], jsonb[], timestamptz[], integer[], text[], integer[]) rename to insert_tasks;
alter function queues.enqueue_debounced(text, jsonb, text, interval, integer, integer) rename to insert_debounced_task;
alter function queues.add_schedule(text, text, text, jsonb, integer, integer, boolean, timestamptz) rename to put_schedule;

-- Roles granted an enqueue function or add_schedule before this migration keep their rights: the
-- renamed insert functions kept their grants; the invoker functions, the permit and the other
-- insert functions are granted to the same roles (what queues.grant_enqueue grants a new role).
-- The functions of the old names are created here for that, as their files say.
\ir functions/queues/enqueue_with_result.sql
\ir functions/queues/enqueue_many_with_result.sql
\ir functions/queues/enqueue_debounced.sql
\ir functions/queues/add_schedule.sql
\ir functions/queues/permit_task_functions.sql
do $$
declare
    _r record;
    _f text;
begin
    for _r in
        select distinct a.grantee::regrole as role, p.proname
        from pg_catalog.pg_proc p
        cross join lateral aclexplode(p.proacl) a
        where p.pronamespace = 'queues'::regnamespace
          and p.proname in ('enqueue', 'enqueue_many', 'insert_task', 'insert_tasks', 'insert_debounced_task', 'put_schedule')
          and a.privilege_type = 'EXECUTE'
          and a.grantee <> 0                 -- PUBLIC
          and a.grantee <> p.proowner
    loop
        if _r.proname <> 'put_schedule' then
            execute format('grant usage on schema queues to %s', _r.role);
        end if;
        foreach _f in array case when _r.proname = 'put_schedule'
            then array['queues.add_schedule(text, text, text, jsonb, integer, integer, boolean, timestamptz)',
                       'queues.permit_task_functions(text[], jsonb[])']
            else array['queues.enqueue(text, jsonb, timestamptz, integer, text, integer)',
                       'queues.enqueue_with_result(text, jsonb, timestamptz, integer, text, integer)',
                       'queues.enqueue_many(text[], jsonb[], timestamptz[], integer[], text[], integer[])',
                       'queues.enqueue_many_with_result(text[], jsonb[], timestamptz[], integer[], text[], integer[])',
                       'queues.enqueue_debounced(text, jsonb, text, interval, integer, integer)',
                       'queues.insert_task(text, jsonb, timestamptz, integer, text, integer)',
                       'queues.insert_tasks(text[], jsonb[], timestamptz[], integer[], text[], integer[])',
                       'queues.insert_debounced_task(text, jsonb, text, interval, integer, integer)',
                       'queues.permit_task_functions(text[], jsonb[])'] end
        loop
            if to_regprocedure(_f) is not null then
                execute format('grant execute on function %s to %s', _f, _r.role);
            end if;
        end loop;
        execute format('grant insert on table queues.enqueue_permit to %s', _r.role);
    end loop;
end $$;
