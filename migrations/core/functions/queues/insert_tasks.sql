-- Inserts many tasks in one statement (SECURITY DEFINER; what enqueue_many calls after its
-- permit); keys repeated within the batch map to one task (keys scoped as queues.insert_task's). Returns each id in input order and
-- whether it was a duplicate. _after and _on_parent_failure apply to every task the call inserts
-- (a duplicate keeps its own parents): a fan-out of many tasks after the same parents
-- (docs/workflows.md), read once for the call (internal.parents_of); without keys each task is
-- written once with what they make it, then the edges (internal.attach_children). A task a limit
-- governs is written with its limit and bucket (internal.limit_of), in the insert itself.
create or replace function queues.insert_tasks(
    _task_types text[],
    _payloads jsonb[],
    _scheduled_ats timestamptz[] default null,
    _priorities integer[] default null,
    _idempotency_keys text[] default null,
    _max_attempts integer[] default null,
    _after bigint[] default null,
    _on_parent_failure text default 'cancel')
returns table (task_id bigint, duplicate boolean)
language plpgsql security definer set search_path = pg_catalog, pg_temp as $_$
#variable_conflict use_column
declare
    _n integer := coalesce(cardinality(_task_types), 0);
    _bad record;
    _ids bigint[];
    _dups boolean[];
    -- The enqueuer, as the column's default has it (core/0090), taken once for the batch rather
    -- than once per row.
    _by text := coalesce(nullif(current_setting('role'), 'none'), session_user::text);
    -- Whether any limit is set: without one, no task is looked up.
    _limits boolean := exists (select from queues.task_limit);
    -- What the parents make each task (internal.parents_of), when the call names some.
    _p_ids bigint[];
    _p_open bigint[];
    _p_workflow bigint;
    _p_status queues.task_status := 'pending';
    _p_stripes integer;
    _p_failed bigint;
    _p_failed_status queues.task_status;
begin
    if coalesce(cardinality(_payloads), 0) <> _n
        or (_scheduled_ats is not null and cardinality(_scheduled_ats) <> _n)
        or (_priorities is not null and cardinality(_priorities) <> _n)
        or (_idempotency_keys is not null and cardinality(_idempotency_keys) <> _n)
        or (_max_attempts is not null and cardinality(_max_attempts) <> _n) then
        raise exception 'enqueue_many: the arrays must all have % elements, one per task', _n
            using errcode = 'invalid_parameter_value';
    end if;
    _after := internal.check_parents_input('enqueue_many', _after, _on_parent_failure);
    if _n = 0 then
        return;
    end if;

    -- Validate the whole batch in one pass; report the first bad task by its position. The time
    -- check is inline (internal.time_in_range, an SQL function with a SET clause, is not
    -- inlined: a call per task).
    select u.ord, u.task_type, u.payload, u.max_attempts, u.idempotency_key, u.scheduled_at into _bad
    from unnest(_task_types, _payloads,
                coalesce(_max_attempts, array_fill(null::integer, array[_n])),
                coalesce(_idempotency_keys, array_fill(null::text, array[_n])),
                coalesce(_scheduled_ats, array_fill(null::timestamptz, array[_n])))
         with ordinality as u(task_type, payload, max_attempts, idempotency_key, scheduled_at, ord)
    where u.task_type is null
       or u.task_type !~ '^[A-Za-z][A-Za-z0-9_.:-]*$' or length(u.task_type) > 128 or u.task_type ^@ 'db_function:'
       or u.payload is null or jsonb_typeof(u.payload) <> 'object'
       or u.max_attempts < 1
       or length(u.idempotency_key) not between 1 and 512
       or u.idempotency_key ^@ 'schedule:' or u.idempotency_key ^@ 'tick:'
       or pg_column_size(u.payload) > internal.max_payload_bytes()
       or u.scheduled_at < '0001-01-01 00:00:00+00' or u.scheduled_at >= '10000-01-01 00:00:00+00'
    order by u.ord
    limit 1;
    if found then
        perform internal.check_task_input(_bad.task_type, _bad.payload, _bad.max_attempts, _bad.idempotency_key,
                                          format('task %s of %s', _bad.ord, _n));
        perform internal.check_finite(format('enqueue_many: task %s of %s', _bad.ord, _n), '_scheduled_ats', _bad.scheduled_at);
    end if;

    if _idempotency_keys is null
       or not exists (select from unnest(_idempotency_keys) as k where k is not null) then
        -- Fast path: no idempotency keys, so no conflicts and no duplicates. Ids are drawn in
        -- input order.
        if _after is not null then
            select * into _p_ids, _p_open, _p_workflow, _p_status, _p_stripes, _p_failed, _p_failed_status
            from internal.parents_of(_after, _on_parent_failure);
        end if;
        with input as materialized (
            select u.ord, u.task_type, u.payload,
                   coalesce(u.scheduled_at, now()) as scheduled_at,
                   coalesce(u.priority, 0) as priority,
                   coalesce(u.max_attempts, queues.default_max_attempts()) as max_attempts,
                   nextval('queues.task_task_id_seq'::regclass) as new_id
            from unnest(_task_types, _payloads,
                        coalesce(_scheduled_ats, array_fill(null::timestamptz, array[_n])),
                        coalesce(_priorities, array_fill(null::integer, array[_n])),
                        coalesce(_max_attempts, array_fill(null::integer, array[_n])))
                 with ordinality as u(task_type, payload, scheduled_at, priority, max_attempts, ord)
        ), ins as (
            insert into queues.task (task_id, task_type, payload, priority, scheduled_at, run_at, max_attempts, enqueued_by,
                                     limit_name, limit_key,
                                     status, cancelled_at, after_ids, on_parent_failure, waiting_stripes, workflow_id)
            select i.new_id, i.task_type, i.payload, i.priority, i.scheduled_at, i.scheduled_at, i.max_attempts, _by,
                   l.task_type, case when l.task_type is not null then internal.limit_key(l.key_field, i.payload) end,
                   _p_status, case when _p_status = 'cancelled' then clock_timestamp() end, _p_ids,
                   case when _after is not null then _on_parent_failure end, _p_stripes, _p_workflow
            from input i
            left join lateral (select * from internal.limit_of(i.task_type, i.payload) where _limits) l on true
        )
        select array_agg(i.new_id order by i.ord) into _ids from input i;
        if _after is not null then
            perform internal.attach_children(_ids, _p_open, _p_workflow, _p_status, _p_stripes, _p_failed, _p_failed_status);
        end if;
        if _task_types && array['db_function', 'email', 'sms', 'file_delete'] then
            perform internal.drop_enqueue_permits();
        end if;
        return query select r.id, false from unnest(_ids) with ordinality as r(id, ord) order by r.ord;
        return;
    end if;

    -- With keys: the first occurrence of a key in the batch is inserted (or finds the existing
    -- task); later occurrences share its id. Ids are drawn in scan order (input order) before
    -- the window sorts by key.
    with numbered as materialized (
        select u.ord, u.task_type, u.payload, u.idempotency_key,
               case when u.task_type = 'db_function' then u.payload ->> 'db_function' else '' end as key_scope,
               coalesce(u.scheduled_at, now()) as scheduled_at,
               coalesce(u.priority, 0) as priority,
               coalesce(u.max_attempts, queues.default_max_attempts()) as max_attempts,
               nextval('queues.task_task_id_seq'::regclass) as new_id
        from unnest(_task_types, _payloads,
                    coalesce(_scheduled_ats, array_fill(null::timestamptz, array[_n])),
                    coalesce(_priorities, array_fill(null::integer, array[_n])),
                    _idempotency_keys,
                    coalesce(_max_attempts, array_fill(null::integer, array[_n])))
             with ordinality as u(task_type, payload, scheduled_at, priority, idempotency_key, max_attempts, ord)
    ), input as materialized (
        select n.*,
               n.idempotency_key is null
                 or n.ord = min(n.ord) over (partition by n.task_type, n.key_scope, n.idempotency_key) as first_of_key
        from numbered n
    ), ins as (
        insert into queues.task as t (task_id, task_type, payload, priority, idempotency_key, scheduled_at, run_at, max_attempts, enqueued_by,
                                      limit_name, limit_key)
        select i.new_id, i.task_type, i.payload, i.priority, i.idempotency_key, i.scheduled_at, i.scheduled_at, i.max_attempts, _by,
               l.task_type, case when l.task_type is not null then internal.limit_key(l.key_field, i.payload) end
        from input i
        left join lateral (select * from internal.limit_of(i.task_type, i.payload) where _limits) l on true
        where i.first_of_key
        on conflict (task_type, key_scope, idempotency_key) where idempotency_key is not null do nothing
        returning t.task_id as inserted_id
    )
    select array_agg(ins.inserted_id order by i.ord) into _ids
    from input i left join ins on ins.inserted_id = i.new_id;

    -- An element nothing was inserted for is a duplicate.
    select array_agg(r.id is null order by r.ord) into _dups
    from unnest(_ids) with ordinality as r(id, ord);

    if array_position(_ids, null) is not null then
        -- Resolve keys held by existing tasks (or by an earlier element of this batch) in a new
        -- statement, which sees everything committed so far.
        select array_agg(coalesce(g.id, t.task_id) order by g.ord) into _ids
        from unnest(_ids, _task_types, _idempotency_keys, _payloads) with ordinality as g(id, task_type, idempotency_key, payload, ord)
        left join queues.task t
               on g.id is null and t.task_type = g.task_type and t.idempotency_key = g.idempotency_key
              and t.key_scope = case when g.task_type = 'db_function' then g.payload ->> 'db_function' else '' end;
        if array_position(_ids, null) is not null then
            raise exception 'enqueue_many: a task holding one of the idempotency keys disappeared during the call; retry'
                using errcode = 'serialization_failure';
        end if;
    end if;
    if _after is not null then
        perform internal.attach_parents(r.id, _after, _on_parent_failure)
        from unnest(_ids, _dups) as r(id, dup) where not r.dup;
    end if;
    if _task_types && array['db_function', 'email', 'sms', 'file_delete'] then
        perform internal.drop_enqueue_permits();
    end if;
    return query select r.id, r.dup from unnest(_ids, _dups) with ordinality as r(id, dup, ord) order by r.ord;
end $_$;
revoke all on function queues.insert_tasks(text[], jsonb[], timestamp with time zone[], integer[], text[], integer[], bigint[], text) from public;
