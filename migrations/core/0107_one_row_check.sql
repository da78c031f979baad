-- The rules of what an enqueue or a completion writes move from eight CHECK constraints of
-- queues.task to a row trigger function, internal.check_task_row_input. PostgreSQL reads and
-- plans every CHECK expression of a table anew for each statement that writes it: for a one-row
-- statement (an enqueue in the application's transaction, the completion of one task, the
-- release of a workflow's child) the eleven constraints cost about 25 µs of the server's time,
-- more than the row and its indexes, and claims and completions paid for rules about columns
-- they never set. The triggers fire only where those columns are written: task_input_valid on
-- inserts and on updates that set task_type, payload, max_attempts, idempotency_key or
-- on_parent_failure; task_result_valid on updates that set debounce_key or result to a value.
-- A broken rule is reported as before, SQLSTATE 23514 under the old constraint's name
-- (docs/benchmarks.md, "The cost of a one-row write"). The rules every claim and completion could
-- break stay constraints: task_running_has_lease, task_running_lease_id, task_times_finite.
--
-- The rows in the table were checked by the constraints the triggers replace (task_payload_size
-- and task_result_size were added NOT VALID, core/0011 and core/0021, so rows older than those
-- were not, and are not now).
\ir functions/internal/check_task_row_input.sql

alter table queues.task
    drop constraint task_type_valid,
    drop constraint task_payload_is_object,
    drop constraint task_payload_size,
    drop constraint task_result_size,
    drop constraint task_max_attempts_positive,
    drop constraint task_idempotency_key_valid,
    drop constraint task_debounce_key_valid,
    drop constraint task_on_parent_failure_valid;

create trigger task_input_valid
    before insert or update of task_type, payload, max_attempts, idempotency_key, on_parent_failure
    on queues.task
    for each row execute function internal.check_task_row_input();

create trigger task_result_valid
    before update of debounce_key, result on queues.task
    for each row when (new.debounce_key is not null or new.result is not null)
    execute function internal.check_task_row_input();
