-- Cached plans on the claim and completion path (docs/benchmarks.md, "Cached plans and bigger
-- claims"). PL/pgSQL caches a statement's plan, but PostgreSQL plans a statement with parameters
-- afresh at every call as long as the plan made without the parameters' values looks more
-- expensive than the ones made with them. For these statements it always did
-- (`task_id = any ($1)`, a LIMIT from a parameter), so every claim and every completion planned its
-- statements afresh; the planner took a quarter of a one-task claim's server time.
--
-- The plans made without the values are the right ones here whatever the values are: an index
-- scan of queues.task's primary key for the tasks asked for (lease_tasks,
-- complete_tasks_with_results) and of task_lease_expiry_idx for the expired leases
-- (rescue_expired_leases). Each connection now plans them once.
--
-- queues.claim_tasks keeps planning its candidate query at each call: the filters it drops when
-- no type is asked for, none paused and none limited are what make its plan an ordered scan of
-- task_claim_idx that stops after _limit rows.
--
-- A later migration that replaces one of these functions must say the setting again.
alter function internal.lease_tasks(text, bigint[], interval) set plan_cache_mode = force_generic_plan;
alter function queues.rescue_expired_leases(integer) set plan_cache_mode = force_generic_plan;
alter function queues.complete_tasks_with_results(bigint[], bigint[], jsonb[]) set plan_cache_mode = force_generic_plan;
