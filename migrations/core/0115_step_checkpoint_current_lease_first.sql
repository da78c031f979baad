-- queues.record_workflow_steps writes, for each position, the first row under the task's current
-- lease (docs/workflows.md, "Durable workflows in Go"). Before, it took the first row of the
-- group for the position whatever its lease: a run that had lost its lease, finishing the same
-- step in the same group as the run that took the task over, had its row chosen and refused,
-- and the current run's checkpoint was refused with it, so that run ended as if its lease were
-- lost and the task ran the step once more.
\ir functions/queues/record_workflow_steps.sql
