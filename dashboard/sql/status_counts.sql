-- The overview's tasks per status, each count capped at $1 rows (shown as "N+" beyond), so that
-- millions of completed tasks cost a bounded scan. Each status is a literal: the planner then
-- uses that status's partial index (pending, running, failed/dead, finished).
select
    (select count(*) from (select from queues.task where status = 'pending' and run_at <= now() limit $1) x),
    (select count(*) from (select from queues.task where status = 'pending' and run_at > now() limit $1) x),
    (select count(*) from (select from queues.task where status = 'running' limit $1) x),
    (select count(*) from (select from queues.task where status = 'completed' limit $1) x),
    (select count(*) from (select from queues.task where status = 'failed' limit $1) x),
    (select count(*) from (select from queues.task where status = 'dead' limit $1) x),
    (select count(*) from (select from queues.task where status = 'cancelled' limit $1) x),
    (select greatest(reltuples, 0)::bigint from pg_class where oid = 'queues.task'::regclass)
