-- Inserts one task (SECURITY DEFINER; what the enqueue functions call after their permit, and
-- what the Go client calls directly for a task that names no function), checking its input
-- (22023) and finite times; a known idempotency key returns the existing task as a duplicate (a
-- db_function task's key is its function's: queues.task.key_scope; keys beginning with schedule:
-- or tick: are the system's, 22023). The row records the enqueuing session's role (enqueued_by).
-- _after names parents the task waits for, _on_parent_failure what a failed one does to it
-- ('cancel' or 'run'; docs/workflows.md); a duplicate keeps its own. A task without a key is
-- written once with what its parents make it (internal.parents_of: waiting, pending or
-- cancelled), then its edges (internal.attach_children); one with a key is inserted first, since
-- only the insert says whether it is new (internal.attach_parents).
-- A task a limit governs is written with its limit and bucket (internal.limit_of), in the
-- insert itself.
create or replace function queues.insert_task(
    _task_type text,
    _payload jsonb,
    _scheduled_at timestamptz default now(),
    _priority integer default 0,
    _idempotency_key text default null,
    _max_attempts integer default null,
    _after bigint[] default null,
    _on_parent_failure text default 'cancel')
returns table (task_id bigint, duplicate boolean)
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _id bigint;
    _dup boolean := false;
    _limit_name text;
    _limit_key text;
    -- What the parents make the task (internal.parents_of), when it names some.
    _p_ids bigint[];
    _p_open bigint[];
    _p_workflow bigint;
    _p_status queues.task_status := 'pending';
    _p_stripes integer;
    _p_failed bigint;
    _p_failed_status queues.task_status;
begin
    -- Every rule in one test; the functions that word the error run only when one is broken.
    if _task_type is null or _task_type !~ '^[A-Za-z][A-Za-z0-9_.:-]*$' or length(_task_type) > 128 or _task_type ^@ 'db_function:'
       or _payload is null or jsonb_typeof(_payload) <> 'object' or pg_column_size(_payload) > 8388608
       or _max_attempts < 1 or length(_idempotency_key) not between 1 and 512
       or _idempotency_key ^@ 'schedule:' or _idempotency_key ^@ 'tick:'
       or _scheduled_at < '0001-01-01 00:00:00+00' or _scheduled_at >= '10000-01-01 00:00:00+00' then
        perform internal.check_task_input(_task_type, _payload, _max_attempts, _idempotency_key);
        perform internal.check_finite('enqueue', '_scheduled_at', _scheduled_at);
    end if;
    _scheduled_at := coalesce(_scheduled_at, now());
    if _after is not null then -- (a call that costs a one-row enqueue a few µs: most have no parents)
        _after := internal.check_parents_input('enqueue', _after, _on_parent_failure);
    end if;

    if exists (select from queues.task_limit) then
        select l.task_type, internal.limit_key(l.key_field, _payload) into _limit_name, _limit_key
        from internal.limit_of(_task_type, _payload) l
        where l.task_type is not null;
    end if;

    if _idempotency_key is null and _after is null then
        insert into queues.task (task_type, payload, priority, scheduled_at, run_at, max_attempts, limit_name, limit_key)
        values (_task_type, _payload, coalesce(_priority, 0), _scheduled_at, _scheduled_at,
                coalesce(_max_attempts, queues.default_max_attempts()), _limit_name, _limit_key)
        returning queues.task.task_id into _id;
    elsif _idempotency_key is null then
        select * into _p_ids, _p_open, _p_workflow, _p_status, _p_stripes, _p_failed, _p_failed_status
        from internal.parents_of(_after, _on_parent_failure);
        insert into queues.task (task_type, payload, priority, scheduled_at, run_at, max_attempts, limit_name, limit_key,
                                 status, cancelled_at, after_ids, on_parent_failure, waiting_stripes, workflow_id)
        values (_task_type, _payload, coalesce(_priority, 0), _scheduled_at, _scheduled_at,
                coalesce(_max_attempts, queues.default_max_attempts()), _limit_name, _limit_key,
                _p_status, case when _p_status = 'cancelled' then clock_timestamp() end, _p_ids, _on_parent_failure,
                _p_stripes, _p_workflow)
        returning queues.task.task_id into _id;
        perform internal.attach_children(array[_id], _p_open, _p_workflow, _p_status, _p_stripes, _p_failed, _p_failed_status);
    else
        -- With a key: insert, or find the task that holds it. The loop covers the rare case where
        -- the holder disappears (rolled back or pruned) between the two statements.
        for _i in 1..3 loop
            insert into queues.task (task_type, payload, priority, idempotency_key, scheduled_at, run_at, max_attempts, limit_name, limit_key)
            values (_task_type, _payload, coalesce(_priority, 0), _idempotency_key, _scheduled_at, _scheduled_at,
                    coalesce(_max_attempts, queues.default_max_attempts()), _limit_name, _limit_key)
            on conflict (task_type, key_scope, idempotency_key) where idempotency_key is not null do nothing
            returning queues.task.task_id into _id;
            exit when _id is not null;

            select t.task_id into _id
            from queues.task t
            where t.task_type = _task_type and t.idempotency_key = _idempotency_key
              and t.key_scope = case when _task_type = 'db_function' then _payload ->> 'db_function' else '' end;
            if _id is not null then
                _dup := true;
                exit;
            end if;
        end loop;
        if _id is null then
            raise exception 'enqueue: could not insert or find the task with idempotency key %', quote_literal(_idempotency_key)
                using errcode = 'serialization_failure';
        end if;
    end if;
    if _after is not null and _idempotency_key is not null and not _dup then
        perform internal.attach_parents(_id, _after, _on_parent_failure);
    end if;
    if _task_type in ('db_function', 'email', 'sms', 'file_delete') then
        perform internal.drop_enqueue_permits();
    end if;
    task_id := _id;
    duplicate := _dup;
    return next;
end $$;
revoke all on function queues.insert_task(text, jsonb, timestamp with time zone, integer, text, integer, bigint[], text) from public;
