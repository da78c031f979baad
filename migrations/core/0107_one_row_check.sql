-- The rules of what an enqueue writes move from six CHECK constraints of queues.task to one row
-- trigger, task_input_valid (internal.check_task_row_input). PostgreSQL reads and plans every
-- CHECK expression of a table anew for each statement that writes it: for a one-row statement (an
-- enqueue in the application's transaction, the completion of one task, the release of a
-- workflow's child) the eleven constraints cost about 25 µs of the server's time, more than the
-- row and its indexes, and claims and completions paid for rules about columns they never set.
-- The trigger fires on inserts and on updates that set those columns; a broken rule is reported
-- as before, SQLSTATE 23514 under the old constraint's name (docs/benchmarks.md, "The cost of a
-- one-row write"). The rules an update can break stay constraints: task_running_has_lease,
-- task_running_lease_id, task_times_finite, task_result_size, and task_debounce_key_valid (a
-- claim clears the key).
--
-- The rows in the table were checked by the constraints the trigger replaces.
\ir functions/internal/check_task_row_input.sql

alter table queues.task
    drop constraint task_type_valid,
    drop constraint task_payload_is_object,
    drop constraint task_payload_size,
    drop constraint task_max_attempts_positive,
    drop constraint task_idempotency_key_valid,
    drop constraint task_on_parent_failure_valid;

create trigger task_input_valid
    before insert or update of task_type, payload, max_attempts, idempotency_key, on_parent_failure
    on queues.task
    for each row execute function internal.check_task_row_input();
