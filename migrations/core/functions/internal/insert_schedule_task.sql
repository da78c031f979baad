-- Enqueues a schedule's task under _key (schedule:<name>:..., a prefix only the system may use:
-- the insert functions refuse it) to run at _at, or finds the task that holds the key. What the
-- leader's ticks, run_schedule_now and backfill_schedule call, as the owner: the permit is asked
-- as the owner, as the enqueue functions called from a schedule function asked it before. The
-- task is the system's own (enqueued_by NULL: docs/security.md, "Reading a task's status"). A
-- task a limit governs is written with its limit and bucket (internal.limit_of) by the insert.
create or replace function internal.insert_schedule_task(_s queues.schedule, _at timestamptz, _key text)
returns table (task_id bigint, duplicate boolean)
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    _id bigint;
    _dup boolean := false;
    _limit_name text;
    _limit_key text;
begin
    if _s.task_type in ('db_function', 'email', 'sms', 'file_delete') then
        perform queues.permit_task_functions(array[_s.task_type], array[_s.payload]);
    end if;
    if exists (select from queues.task_limit) then
        select l.task_type, internal.limit_key(l.key_field, _s.payload) into _limit_name, _limit_key
        from internal.limit_of(_s.task_type, _s.payload) l
        where l.task_type is not null;
    end if;
    -- Insert, or find the task that holds the key; the loop covers a holder that disappears
    -- (rolled back or pruned) between the two statements, as queues.insert_task's does.
    for _i in 1..3 loop
        insert into queues.task as t (task_type, payload, priority, idempotency_key, scheduled_at, run_at, max_attempts, enqueued_by,
                                      limit_name, limit_key)
        values (_s.task_type, _s.payload, coalesce(_s.priority, 0), _key, _at, _at,
                coalesce(_s.max_attempts, queues.default_max_attempts()), null, _limit_name, _limit_key)
        on conflict (task_type, key_scope, idempotency_key) where idempotency_key is not null do nothing
        returning t.task_id into _id;
        exit when _id is not null;

        select t.task_id into _id
        from queues.task t
        where t.task_type = _s.task_type and t.idempotency_key = _key
          and t.key_scope = case when _s.task_type = 'db_function' then _s.payload ->> 'db_function' else '' end;
        if _id is not null then
            _dup := true;
            exit;
        end if;
    end loop;
    if _id is null then
        raise exception 'enqueue: could not insert or find the task with idempotency key %', quote_literal(_key)
            using errcode = 'serialization_failure';
    end if;
    if _s.task_type in ('db_function', 'email', 'sms', 'file_delete') then
        perform internal.drop_enqueue_permits();
    end if;
    task_id := _id;
    duplicate := _dup;
    return next;
end $$;
revoke all on function internal.insert_schedule_task(queues.schedule, timestamp with time zone, text) from public;
