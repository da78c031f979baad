-- A waiting task with one open parent keeps no stripe counter (docs/workflows.md, "How the release
-- works"): its edge is the counter (stripe -1), and the parent's end, which deletes the edge,
-- releases it with one update of its row. Tasks with 2 to 16 open parents keep one
-- queues.task_wait_stripe row, more keep ceil(sqrt(k)); a stripe row is deleted when it empties.
-- Tasks waiting when this migration is applied keep the rows they have (a stripe left at 0 by the
-- earlier release goes with the release or with the task).

comment on column queues.task.waiting_stripes is
    'While waiting: how many of its counters have not reached 0 (its edge of stripe -1 when it waits for one parent, else its queues.task_wait_stripe rows).';
comment on column queues.task_edge.stripe is
    'The queues.task_wait_stripe row that counts this parent''s end; -1: the edge is the counter (its child waits for this parent only).';
