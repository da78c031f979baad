-- The supervisor and the success handler: a permanent failure of the current run ends it.
-- The supervisor: one run (a tick) advances up to 500 due instances, set-based. For each:
-- Input (its facts) -> Compute -> Output, as in docs/processes.md:
--   a terminal fact exists             nothing to do; the instance leaves the agenda
--   an attempt succeeded               record file_deletion_task_succeeded
--   an attempt failed permanently      record file_deletion_task_failed: "permanent: ..." (no retry)
--   max_attempts attempts failed       record file_deletion_task_failed with the last error
--   an attempt is outstanding          look again after check_interval (its handlers wake us sooner)
--   the backoff after a failure runs   look again when it ends
--   otherwise                          a new attempt: one file_delete task with its handlers
-- An outstanding attempt whose file_delete task ended without recording an outcome (its handlers kept
-- failing until it died, or an operator cancelled it) counts as failed first.
-- A payload with file_deletion_task_id (what earlier versions enqueued per instance) makes that
-- instance due first; an id that does not exist is refused as before.
create or replace function files.file_deletion_supervisor(_payload jsonb) returns jsonb
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _cfg       files.process_config;
    _clean     boolean;
    _ids       bigint[];
    _id        bigint;
    _done      bigint[];
    _succeed   bigint[];
    _fail      bigint[];
    _fail_msg  text[];
    _new       bigint[];
    _later     bigint[];
    _later_at  timestamptz[];
    _attempts  bigint[];
    _tasks     bigint[];
    _next      timestamptz;
begin
    if _payload ? 'file_deletion_task_id' then
        if jsonb_typeof(_payload -> 'file_deletion_task_id') is distinct from 'number' then
            return jsonb_build_object('success', false,
                'validation_failure_message', 'file_deletion_supervisor: payload needs a numeric file_deletion_task_id');
        end if;
        _id := (_payload ->> 'file_deletion_task_id')::bigint;
        if not exists (select 1 from files.file_deletion_task where file_deletion_task_id = _id) then
            return jsonb_build_object('success', false,
                'validation_failure_message', format('file_deletion_supervisor: file_deletion_task %s does not exist', _id));
        end if;
        if not exists (select 1 from files.file_deletion_task_succeeded where file_deletion_task_id = _id)
           and not exists (select 1 from files.file_deletion_task_failed where file_deletion_task_id = _id and run = files.file_deletion_run(_id)) then
            insert into files.file_deletion_due as d (file_deletion_task_id, due_at) values (_id, now())
            on conflict (file_deletion_task_id) do update set due_at = least(d.due_at, excluded.due_at);
        end if;
    end if;

    -- Input
    _clean := queues.supervisor_tick_clean('files.file_deletion_supervisor');
    select array_agg(d.file_deletion_task_id) into _ids
    from (select file_deletion_task_id from files.file_deletion_due where due_at <= now()
          order by due_at limit 500 for update skip locked) d;
    if _ids is null then
        select min(due_at) into _next from files.file_deletion_due;
        perform queues.schedule_supervisor_tick('files.file_deletion_supervisor', _next);
        return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('instances', 0, 'clean', _clean));
    end if;
    select * into _cfg from files.process_config where process = 'file_deletion';

    insert into files.file_deletion_attempt_failed (file_deletion_attempt_id, error_message)
    select a.file_deletion_attempt_id,
           format('the file_delete task %s ended %s without recording an outcome%s', a.task_id,
                  coalesce(t.status::text, 'and was removed'), coalesce(': ' || t.last_error, ''))
    from files.file_deletion_attempt a
    left join queues.task t on t.task_id = a.task_id
    where a.file_deletion_task_id = any (_ids)
      and (t.task_id is null or t.status in ('completed', 'failed', 'dead', 'cancelled'))
      and not exists (select 1 from files.file_deletion_attempt_succeeded s where s.file_deletion_attempt_id = a.file_deletion_attempt_id)
      and not exists (select 1 from files.file_deletion_attempt_failed f where f.file_deletion_attempt_id = a.file_deletion_attempt_id)
    on conflict do nothing;

    -- Compute
    with facts as (
        select r.file_deletion_task_id as id, r.scheduled_at,
               exists (select 1 from files.file_deletion_task_succeeded x where x.file_deletion_task_id = r.file_deletion_task_id)
               or exists (select 1 from files.file_deletion_task_failed x where x.file_deletion_task_id = r.file_deletion_task_id and x.run >= coalesce(rs.run, 1)) as terminal,
               coalesce(a.attempts, 0) as attempts, coalesce(a.failures, 0) as failures,
               coalesce(a.succeeded, false) as succeeded, a.succeeded_at, a.last_fail, a.last_error, a.permanent_error
        from files.file_deletion_task r
        -- The run: restarts by hand (retry_file_deletion); only the attempts made since the last one count.
        left join lateral (
            select max(z.run) as run, max(z.last_attempt_id) as last_attempt_id
            from files.file_deletion_task_restarted z where z.file_deletion_task_id = r.file_deletion_task_id
        ) rs on true
        -- One pass over the instance's attempts (an index range), with their facts.
        left join lateral (
            select count(distinct a.file_deletion_attempt_id) as attempts, count(distinct f.file_deletion_attempt_id) as failures,
                   bool_or(s.file_deletion_attempt_id is not null) as succeeded, min(s.created_at) as succeeded_at,
                   max(f.created_at) as last_fail,
                   (array_agg(f.error_message order by f.created_at desc) filter (where f.file_deletion_attempt_id is not null))[1] as last_error,
                   -- A permanent failure (the provider said retrying cannot succeed) ends the run.
                   (array_agg(f.error_message order by f.created_at desc) filter (where f.error_class = 'permanent'))[1] as permanent_error
            from files.file_deletion_attempt a
            left join files.file_deletion_attempt_succeeded s using (file_deletion_attempt_id)
            left join files.file_deletion_attempt_failed f using (file_deletion_attempt_id)
            where a.file_deletion_task_id = r.file_deletion_task_id and a.file_deletion_attempt_id > coalesce(rs.last_attempt_id, 0)
        ) a on true
        where r.file_deletion_task_id = any (_ids)
    ), timed as (
        select f.*,
               greatest(f.scheduled_at, coalesce(f.last_fail, '-infinity')
                        + queues.process_backoff(f.failures::integer, _cfg.backoff_base, _cfg.backoff_max)) as next_try
        from facts f
    ), decided as (
        select t.id,
               case when t.terminal then 'done'
                    when t.succeeded then 'succeed'
                    when t.permanent_error is not null then 'fail'
                    when t.failures >= _cfg.max_attempts then 'fail'
                    when t.attempts = t.failures and t.next_try <= now() then 'attempt'
                    else 'later' end as action,
               case when t.permanent_error is not null then format('permanent: file not deleted: %s', t.permanent_error)
                    else format('file not deleted after %s failed attempts (max %s); last error: %s',
                                t.failures, _cfg.max_attempts, coalesce(t.last_error, 'none')) end as message,
               case
                    when t.attempts = t.failures then t.next_try
                    else now() + _cfg.check_interval end as next_at
        from timed t
    )
    select array_agg(id) filter (where action = 'done'),
           array_agg(id) filter (where action = 'succeed'),
           array_agg(id) filter (where action = 'fail'),
           array_agg(message) filter (where action = 'fail'),
           array_agg(id) filter (where action = 'attempt'),
           array_agg(id) filter (where action = 'later'),
           array_agg(next_at) filter (where action = 'later')
    into _done, _succeed, _fail, _fail_msg, _new, _later, _later_at
    from decided;

    -- Output
    insert into files.file_deletion_task_succeeded (file_deletion_task_id) select unnest(_succeed) on conflict do nothing;
    insert into files.file_deletion_task_failed (file_deletion_task_id, error_message) select * from unnest(_fail, _fail_msg) on conflict do nothing;
    delete from files.file_deletion_due where file_deletion_task_id = any (coalesce(_done, '{}') || coalesce(_succeed, '{}') || coalesce(_fail, '{}'));
    update files.file_deletion_due d set due_at = l.at from unnest(_later, _later_at) as l(id, at) where d.file_deletion_task_id = l.id;
    if _new is not null then
        with a as (
            insert into files.file_deletion_attempt (file_deletion_task_id) select unnest(_new)
            returning file_deletion_attempt_id, file_deletion_task_id
        )
        select array_agg(file_deletion_attempt_id order by file_deletion_attempt_id) into _attempts from a;
        select array_agg(e.task_id order by e.ord) into _tasks
        from queues.enqueue_many_with_result(
            array_fill('file_delete'::text, array[cardinality(_attempts)]),
            (select array_agg(jsonb_build_object(
                        'file_deletion_task_id', a.file_deletion_task_id,
                        'file_deletion_attempt_id', a.file_deletion_attempt_id,
                        'file_id', (select r.file_id from files.file_deletion_task r where r.file_deletion_task_id = a.file_deletion_task_id),
                        'before_handler', 'files.get_file_delete_payload',
                        'success_handler', 'files.record_file_delete_success',
                        'error_handler', 'files.record_file_delete_failure') order by a.file_deletion_attempt_id)
             from files.file_deletion_attempt a where a.file_deletion_attempt_id = any (_attempts)),
            null, null, null, array_fill(5, array[cardinality(_attempts)])) with ordinality as e(task_id, duplicate, ord);
        update files.file_deletion_attempt a set task_id = x.task_id
        from unnest(_attempts, _tasks) as x(attempt_id, task_id) where a.file_deletion_attempt_id = x.attempt_id;
        update files.file_deletion_due d set due_at = now() + _cfg.check_interval where d.file_deletion_task_id = any (_new);
    end if;

    select min(due_at) into _next from files.file_deletion_due;
    perform queues.schedule_supervisor_tick('files.file_deletion_supervisor', _next);
    return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object(
        'instances', cardinality(_ids), 'clean', _clean,
        'succeeded', coalesce(cardinality(_succeed), 0), 'failed', coalesce(cardinality(_fail), 0),
        'new_attempts', coalesce(cardinality(_new), 0), 'next_tick_at', _next));
end $$;
revoke all on function files.file_deletion_supervisor(jsonb) from public;
grant execute on function files.file_deletion_supervisor(jsonb) to worker_service_user;
