-- Long transactions never hurt their neighbours (docs/design.md, "Which statement locks what").
--
-- 1. A db_function task's transaction held its task row FOR UPDATE (queues.lock_lease) for as long
--    as the function ran. Every other statement that touches the row waited behind it: the
--    worker's renewal of all its leases (one statement, so no lease of that worker was renewed
--    until the function committed, and tasks beside it expired and ran again), a cancel, a retry,
--    a failure written from another connection. lock_lease now takes FOR KEY SHARE, which no
--    UPDATE that leaves task_id alone conflicts with: renewals, cancels and releases go around the
--    function's transaction, and its completion, in the same transaction, is fenced by the lease
--    as any other (a cancelled or taken-over task refuses it, and the function's work is rolled
--    back). The claim's rescue of expired leases (FOR UPDATE SKIP LOCKED) still skips the row
--    while the function runs: nobody takes the task over under it.
--    cancel_task, retry_task and fail_attempt lock with FOR NO KEY UPDATE for the same reason.
--
-- 2. Statements that update several tasks lock them in task_id order (renew_leases,
--    complete_tasks_with_results, release_tasks): a worker's renewal and its completer's batch no
--    longer deadlock on the same two tasks taken in opposite orders. A renewal never waits at all
--    (SKIP LOCKED): a row locked at that moment is renewed at the next tick.
--
-- 3. Outcomes are stamped with the time they happen (clock_timestamp()), not with the start of
--    their transaction: a db_function task that ran 15 s completes 15 s after its claim.
--
-- 4. renew_leases and lost_leases return the lease ids they answer for, so a worker holding a
--    task under two leases (a stale run and a newer one) tells them apart.
--
-- The functions (lock_lease, cancel_task, retry_task, internal.fail_attempt, complete_failed_call,
-- complete_tasks_with_results, renew_leases, lost_leases, release_tasks, rescue_expired_leases)
-- are in their files under functions/; renew_leases and lost_leases return more columns, so the
-- old ones are dropped here and their files create them again.

drop function queues.renew_leases(bigint[], bigint[], interval);
drop function queues.lost_leases(bigint[], bigint[]);

-- History rows are stamped when they are written.
alter table queues.task_event alter column occurred_at set default clock_timestamp();
alter table queues.error alter column occurred_at set default clock_timestamp();
