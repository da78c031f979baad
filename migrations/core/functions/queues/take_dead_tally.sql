-- The tasks that went dead by lease expiry or a dead worker's recovery (queues.task_dead_tally)
-- since the last call, per task type, and marks them reported: the leader calls it with its
-- queue sample and adds them to taskorch_tasks_failed_total{outcome="dead"}, so each is counted
-- once, by whichever worker leads (docs/operations.md, "Metrics and alerts"). A row that a
-- recovery is counting meanwhile is left for the next call.
create or replace function queues.take_dead_tally()
returns table (task_type text, dead bigint)
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    with due as (
        select d.task_type, d.dead - d.reported as n
        from queues.task_dead_tally d
        where d.dead > d.reported
        for update skip locked
    )
    update queues.task_dead_tally d
    set reported = d.reported + due.n
    from due
    where d.task_type = due.task_type
    returning d.task_type, due.n
$$;
revoke all on function queues.take_dead_tally() from public;
grant execute on function queues.take_dead_tally() to worker_service_user;
comment on function queues.take_dead_tally() is 'Per task type, the tasks that went dead by lease expiry or a dead worker''s recovery since the last call; marks them reported (the leader''s metrics count each once).';
