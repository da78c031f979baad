-- The ids of the tasks a filter matches, after _after_task_id, in id order, at most _limit (NULL:
-- all). A type in _task_types may be one SQL function's queue, db_function:<schema.function>. Custom plans: each call is planned for its own statuses and bounds, so a rare status is
-- read through its partial index (task_needs_attention_idx for failed and dead tasks, ordered by
-- id) and a finish-time window through task_finished_idx.
create or replace function internal.matching_tasks(
    _statuses queues.task_status[], _task_types text[], _idempotency_key text,
    _enqueued_since timestamptz, _enqueued_until timestamptz, _finished_since timestamptz, _finished_until timestamptz,
    _after_task_id bigint, _limit integer)
returns setof bigint
language plpgsql stable set search_path = pg_catalog, pg_temp set plan_cache_mode = force_custom_plan set jit = off as $$
begin
    return query
    select t.task_id
    from queues.task t
    where t.status = any (_statuses)
      and (_task_types is null or t.task_type = any (_task_types)
           -- one SQL function's queue, as queues list names it (internal/admin.TypeMatch)
           or (t.task_type = 'db_function' and 'db_function:' || (t.payload ->> 'db_function') = any (_task_types)))
      and (_idempotency_key is null or t.idempotency_key = _idempotency_key)
      and (_enqueued_since is null or t.enqueued_at >= _enqueued_since)
      and (_enqueued_until is null or t.enqueued_at < _enqueued_until)
      and (_finished_since is null or (t.status in ('completed', 'cancelled', 'failed', 'dead')
                                       and greatest(t.completed_at, t.cancelled_at, t.failed_at, t.dead_at) >= _finished_since))
      and (_finished_until is null or (t.status in ('completed', 'cancelled', 'failed', 'dead')
                                       and greatest(t.completed_at, t.cancelled_at, t.failed_at, t.dead_at) < _finished_until))
      and t.task_id > _after_task_id
    order by t.task_id
    limit _limit;
end $$;
revoke all on function internal.matching_tasks(queues.task_status[], text[], text, timestamptz, timestamptz, timestamptz, timestamptz, bigint, integer) from public;
