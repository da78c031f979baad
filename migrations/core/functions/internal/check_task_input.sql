-- Validates one task's definition; raises 22023 with a message that says what is wrong. Keys
-- beginning with schedule: or tick: are the system's (docs/sql.md, "Keys"); task types beginning
-- with db_function: name a SQL function's limit and queue, never a task (docs/sql.md, "Task
-- types").
create or replace function internal.check_task_input(
    _task_type text, _payload jsonb, _max_attempts integer, _idempotency_key text, _label text default 'enqueue')
returns void
language plpgsql immutable set search_path = pg_catalog, pg_temp as $$
begin
    if _task_type is null or _task_type = '' then
        raise exception '%: task_type must not be empty', _label using errcode = 'invalid_parameter_value';
    end if;
    if _task_type !~ '^[A-Za-z][A-Za-z0-9_.:-]*$' or length(_task_type) > 128 then
        raise exception '%: task_type % is malformed: use 1 to 128 letters, digits, "_", ".", ":" or "-", starting with a letter',
            _label, quote_literal(left(_task_type, 140)) using errcode = 'invalid_parameter_value';
    end if;
    if _task_type ^@ 'db_function:' then
        raise exception '%: task_type % is reserved: a SQL function''s task has the type db_function and names its function in the payload ({"db_function": %}); "db_function:<function>" names only that function''s limit and queue',
            _label, quote_literal(left(_task_type, 140)), to_jsonb(substr(left(_task_type, 140), 13))
            using errcode = 'invalid_parameter_value';
    end if;
    if _payload is null or jsonb_typeof(_payload) <> 'object' then
        raise exception '%: payload must be a JSON object, got %', _label, coalesce(jsonb_typeof(_payload), 'null')
            using errcode = 'invalid_parameter_value';
    end if;
    if pg_column_size(_payload) > internal.max_payload_bytes() then
        raise exception '%: payload is % bytes, over the limit of % bytes (8 MiB) per task',
            _label, pg_column_size(_payload), internal.max_payload_bytes()
            using errcode = 'invalid_parameter_value',
                  hint = 'Store large data elsewhere (a table, object storage) and put its key in the payload.';
    end if;
    if _max_attempts is not null and _max_attempts < 1 then
        raise exception '%: max_attempts must be at least 1, got %', _label, _max_attempts
            using errcode = 'invalid_parameter_value';
    end if;
    if _idempotency_key is not null and length(_idempotency_key) not between 1 and 512 then
        raise exception '%: idempotency_key must be 1 to 512 characters, got %', _label, length(_idempotency_key)
            using errcode = 'invalid_parameter_value';
    end if;
    if _idempotency_key ^@ 'schedule:' or _idempotency_key ^@ 'tick:' then
        raise exception '%: idempotency_key % begins with %, a prefix reserved for the system''s own tasks (schedule and supervisor ticks)',
            _label, quote_literal(left(_idempotency_key, 100)), quote_literal(split_part(_idempotency_key, ':', 1) || ':')
            using errcode = 'invalid_parameter_value';
    end if;
end $$;
revoke all on function internal.check_task_input(text, jsonb, integer, text, text) from public;
