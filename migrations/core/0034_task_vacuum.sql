-- Vacuum queues.task by a fixed number of dead rows, and always clean its indexes
-- (docs/operations.md, "Vacuum of the task table").
--
-- Every claim leaves the claimed task's entry in task_claim_idx (and every completion its entry in
-- task_lease_expiry_idx) dead. While the queue runs steadily those entries are removed as new
-- ones arrive on the same index pages. After a backlog drains they are not: the entries of every
-- task it held stay at the front of the index, and each later claim reads through them until
-- VACUUM removes them. After 300,000 tasks drained, a claim of an empty queue read 1,480 index
-- pages (4 ms) instead of 1.
--
-- By default autovacuum waits until a fifth of the table's rows are dead, and queues.task keeps
-- a week of finished tasks: a 300,000-task drain in a table of 3 million left 600,000 dead rows,
-- under the 660,000 that start a vacuum, and the claims stayed slow. When one does run,
-- it skips the indexes if the dead rows sit on fewer than 2% of the table's pages, which after a
-- drain in a large table they do.
--
-- With a fixed threshold of 50,000 dead rows (25,000 tasks: each claim and each completion leaves
-- one) and index cleanup always on, autovacuum cleans the front of the index within its next
-- round (autovacuum_naptime, a minute by default) of a drain of any size. The price is a vacuum of
-- queues.task every time 25,000 tasks have run, whose index pass reads every index of the table:
-- 2 seconds (0.4 s of CPU) with 3 million tasks in the table.
--
-- ALTER TABLE ... SET takes a SHARE UPDATE EXCLUSIVE lock: claims, enqueues and outcomes go on.
-- An operator may change them (ALTER TABLE queues.task SET / RESET).
alter table queues.task set (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 50000,
    vacuum_index_cleanup = on
);
