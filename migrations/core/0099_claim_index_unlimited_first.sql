-- The claim index leads with whether a task is unlimited (docs/limits.md, "What the claim does").
--
-- A claim finds its unlimited candidates (no limit governs them) by an ordered scan of the claim
-- index, and hands the tasks of limited types to internal.limited_candidates, which reads them by
-- task_limited_pending_idx. With the index on (priority desc, run_at, task_id) alone, that scan read
-- past every pending task of a limited type before it found an unlimited one, or found none: a
-- backlog of 50,000 limited tasks cost every claim of every worker 27 ms, whatever it claimed. Led
-- by (limit_name is null) desc, the unlimited tasks come first in claim order, and the scan for
-- them stops at the first limited one. Without limits every pending task has a NULL limit_name, and
-- the order is the one before. The index entry keeps its size (the boolean fits in the padding
-- before priority), and a change of limit_name already made an update non-HOT
-- (task_limited_pending_idx has the column).
create index task_claim_unlimited_first_idx on queues.task ((limit_name is null) desc, priority desc, run_at, task_id)
    where status = 'pending';
drop index queues.task_claim_idx;
alter index queues.task_claim_unlimited_first_idx rename to task_claim_idx;
