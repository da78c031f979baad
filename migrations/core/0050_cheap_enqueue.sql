-- An enqueue at the cost of a row (docs/design.md, "Enqueue"; docs/benchmarks.md, "Enqueue in
-- the application's transaction"). The tables' part: the functions are in their files
-- (functions/internal/notify_task_inserted.sql, enqueue_lock_key.sql;
-- functions/queues/worker_waiting.sql, insert_task.sql, insert_tasks.sql).
--
-- 1. Wake-ups only for a worker that waits. A transaction that sends NOTIFY takes a cluster-wide
--    lock at commit and holds it until its commit record is flushed, so notifying transactions
--    commit one at a time; with a NOTIFY per enqueueing statement, 32 sessions each committing
--    an order row and one task ran at a fifth of the order rows alone. Now a worker about to
--    wait says so (queues.worker_waiting, which bumps the first sequence below), and an enqueue
--    notifies only when a worker waits that no enqueue has answered yet; the enqueue that
--    answers records the answer in the second sequence. Sequences are not transactional: every
--    session sees a bump at once, and neither takes a row lock.
--
-- 2. A leaner insert. The task table's finite-times CHECK called internal.time_in_range, an SQL
--    function with a SET clause, which PostgreSQL cannot inline: ten calls per row, each
--    planned afresh in every statement, about 100 us per single-row insert or update. The
--    constraint now tests the same bounds without a function call (same name, same rule).

-- 1. Wake-ups --------------------------------------------------------------------------------

-- Bumped by every worker about to wait for a notification.
create sequence internal.task_waiter_seq as bigint;
-- The waiter_seq value the latest notification answered: a notification is owed while it is
-- below task_waiter_seq.
create sequence internal.task_woken_seq as bigint minvalue 0 start with 0;
revoke all on sequence internal.task_waiter_seq, internal.task_woken_seq from public;

-- 2. The insert ------------------------------------------------------------------------------

-- The same rule as internal.time_in_range for each time, in one expression without a function
-- call: the range contains every time, and a NULL time makes the ALL NULL, which a CHECK accepts
-- (it fails only on false). A short expression, too: PostgreSQL reads a table's CHECK
-- expressions anew for every statement that writes it, and 20 comparisons read three times
-- slower than the ten calls they replace.
alter table queues.task drop constraint task_times_finite,
    add constraint task_times_finite check (
        '[0001-01-01 00:00:00+00,10000-01-01 00:00:00+00)'::tstzrange @> all (array[
            enqueued_at, scheduled_at, run_at, lease_expires_at, claimed_at, completed_at, failed_at,
            dead_at, cancelled_at, dispatched_at]));
comment on constraint task_times_finite on queues.task is
    'Every time is NULL or within the years 1 to 9999 (the rule of internal.time_in_range, without a function call per time).';
