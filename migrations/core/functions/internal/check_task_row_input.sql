-- Trigger of queues.task, per row: the rules of what an enqueue or a completion writes, which
-- were CHECK constraints until core/0107. PostgreSQL reads and plans every CHECK expression of a
-- table anew for each statement that writes it, so these eight cost every one-row statement (an
-- enqueue in the application's transaction, a task's completion, a workflow child's release)
-- about 18 µs of the server's time, claims and completions included, which never change most of
-- these columns; here they cost about 1 µs per row, only where their columns are written
-- (docs/benchmarks.md, "The cost of a one-row write"). Two triggers call it:
--   task_input_valid   before insert, and before an update that sets task_type, payload,
--                      max_attempts, idempotency_key or on_parent_failure;
--   task_result_valid  before an update that sets debounce_key or result to a value (a claim
--                      clears the debounce key, a completion sets a result).
-- A broken rule is reported as its constraint was: SQLSTATE 23514 under the constraint's name.
--   task_type_valid              task_type matches ^[A-Za-z][A-Za-z0-9_.:-]*$, at most 128 long,
--                                and does not begin with db_function: (a function's limit and
--                                queue name, never a task's type)
--   task_payload_is_object       payload is a JSON object
--   task_payload_size            payload at most 8 MiB (pg_column_size)
--   task_result_size             result NULL or at most 8 MiB
--   task_max_attempts_positive   max_attempts > 0
--   task_idempotency_key_valid   idempotency_key NULL or 1 to 512 characters
--   task_debounce_key_valid      debounce_key NULL or 1 to 512 characters
--   task_on_parent_failure_valid on_parent_failure NULL, 'cancel' or 'run'
-- The rules every claim and completion could break (a running task's lease, finite times) stay
-- CHECK constraints. No SET search_path (a configuration change per row would cost more than
-- the rules): every name is qualified; only the table's owner writes the table (its functions).
create or replace function internal.check_task_row_input() returns trigger
language plpgsql as $$
declare
    _rule text;
begin
    if (new.task_type operator(pg_catalog.~) '^[A-Za-z][A-Za-z0-9_.:-]*$'
            and pg_catalog.length(new.task_type) operator(pg_catalog.<=) 128
            and not new.task_type operator(pg_catalog.^@) 'db_function:') is not false
       and (pg_catalog.jsonb_typeof(new.payload) operator(pg_catalog.=) 'object') is not false
       and (pg_catalog.pg_column_size(new.payload) operator(pg_catalog.<=) 8388608) is not false
       and (pg_catalog.pg_column_size(new.result) operator(pg_catalog.<=) 8388608) is not false
       and (new.max_attempts operator(pg_catalog.>) 0) is not false
       and (pg_catalog.length(new.idempotency_key) between 1 and 512) is not false
       and (pg_catalog.length(new.debounce_key) between 1 and 512) is not false
       and (new.on_parent_failure operator(pg_catalog.=) any ('{cancel,run}'::pg_catalog.text[])) is not false then
        return new;
    end if;
    -- A rule is broken: name the first, as its constraint did.
    _rule := case
        when (new.task_type operator(pg_catalog.~) '^[A-Za-z][A-Za-z0-9_.:-]*$'
              and pg_catalog.length(new.task_type) operator(pg_catalog.<=) 128
              and not new.task_type operator(pg_catalog.^@) 'db_function:') is false then 'task_type_valid'
        when (pg_catalog.jsonb_typeof(new.payload) operator(pg_catalog.=) 'object') is false then 'task_payload_is_object'
        when (pg_catalog.pg_column_size(new.payload) operator(pg_catalog.<=) 8388608) is false then 'task_payload_size'
        when (pg_catalog.pg_column_size(new.result) operator(pg_catalog.<=) 8388608) is false then 'task_result_size'
        when (new.max_attempts operator(pg_catalog.>) 0) is false then 'task_max_attempts_positive'
        when (pg_catalog.length(new.idempotency_key) between 1 and 512) is false then 'task_idempotency_key_valid'
        when (pg_catalog.length(new.debounce_key) between 1 and 512) is false then 'task_debounce_key_valid'
        else 'task_on_parent_failure_valid'
    end;
    raise exception 'new row for relation "task" violates check constraint "%"', _rule
        using errcode = 'check_violation', schema = 'queues', table = 'task', constraint = _rule,
              detail = pg_catalog.format('The row''s task_type is %s.', pg_catalog.quote_literal(pg_catalog.left(new.task_type, 130)));
end $$;
revoke all on function internal.check_task_row_input() from public;
