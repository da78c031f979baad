-- One batch of an operator's retry by filter, after a cursor (docs/sql.md, "Operators' actions").
create or replace function queues.retry_tasks_matching(
    _statuses queues.task_status[] default null, _task_types text[] default null, _idempotency_key text default null,
    _enqueued_since timestamptz default null, _enqueued_until timestamptz default null,
    _finished_since timestamptz default null, _finished_until timestamptz default null,
    _after_task_id bigint default 0, _batch integer default 500, _actor text default null)
returns table (matched integer, done integer, skipped integer, last_task_id bigint)
language sql security definer set search_path = pg_catalog, pg_temp as $$
    select * from internal.task_action_batch('retry_tasks_matching', 'retry', _statuses, _task_types, _idempotency_key,
        _enqueued_since, _enqueued_until, _finished_since, _finished_until, _after_task_id, _batch, _actor, null)
$$;
revoke all on function queues.retry_tasks_matching(queues.task_status[], text[], text, timestamptz, timestamptz, timestamptz, timestamptz, bigint, integer, text) from public;
comment on function queues.retry_tasks_matching(queues.task_status[], text[], text, timestamptz, timestamptz, timestamptz, timestamptz, bigint, integer, text) is
    'One batch of a retry by filter: the dead, failed or cancelled tasks (or _statuses among them) matching the filter, after _after_task_id, at most _batch (1 to 1,000); call again with _after_task_id => last_task_id until matched < _batch. Enqueue and finish times: since inclusive, until exclusive.';
