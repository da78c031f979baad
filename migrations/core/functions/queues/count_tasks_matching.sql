-- How many tasks an action by filter would act on now: the dry run of the _matching functions.
create or replace function queues.count_tasks_matching(
    _action text, _statuses queues.task_status[] default null, _task_types text[] default null, _idempotency_key text default null,
    _enqueued_since timestamptz default null, _enqueued_until timestamptz default null,
    _finished_since timestamptz default null, _finished_until timestamptz default null)
returns bigint
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
declare
    _st queues.task_status[];
begin
    _st := internal.check_task_filter('count_tasks_matching', _action, _statuses, _task_types, _idempotency_key,
                                      _enqueued_since, _enqueued_until, _finished_since, _finished_until);
    return (select count(*) from internal.matching_tasks(_st, _task_types, _idempotency_key, _enqueued_since, _enqueued_until,
                                                          _finished_since, _finished_until, 0, null));
end $$;
revoke all on function queues.count_tasks_matching(text, queues.task_status[], text[], text, timestamptz, timestamptz, timestamptz, timestamptz) from public;
comment on function queues.count_tasks_matching(text, queues.task_status[], text[], text, timestamptz, timestamptz, timestamptz, timestamptz) is
    'How many tasks _action (retry, cancel or delete) would act on with this filter now: a dry run of the _matching functions (a task whose row is locked then may still be skipped). Reads, locks nothing.';
