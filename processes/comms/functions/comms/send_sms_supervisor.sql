-- The supervisor and the success handler: a permanent failure of the current run ends it.
-- The supervisor: one run (a tick) advances up to 500 due instances, set-based. For each:
-- Input (its facts) -> Compute -> Output, as in docs/processes.md:
--   a terminal fact exists             nothing to do; the instance leaves the agenda
--   an attempt succeeded               record send_sms_task_succeeded
--   an attempt failed permanently      record send_sms_task_failed: "permanent: ..." (no retry)
--   max_attempts attempts failed       record send_sms_task_failed with the last error
--   an attempt is outstanding          look again after check_interval (its handlers wake us sooner)
--   the backoff after a failure runs   look again when it ends
--   otherwise                          a new attempt: one sms task with its handlers
-- An outstanding attempt whose sms task ended without recording an outcome (its handlers kept
-- failing until it died, or an operator cancelled it) counts as failed first.
-- A payload with send_sms_task_id (what earlier versions enqueued per instance) makes that
-- instance due first; an id that does not exist is refused as before.
create or replace function comms.send_sms_supervisor(_payload jsonb) returns jsonb
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _cfg       comms.process_config;
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
    if _payload ? 'send_sms_task_id' then
        if jsonb_typeof(_payload -> 'send_sms_task_id') is distinct from 'number' then
            return jsonb_build_object('success', false,
                'validation_failure_message', 'send_sms_supervisor: payload needs a numeric send_sms_task_id');
        end if;
        _id := (_payload ->> 'send_sms_task_id')::bigint;
        if not exists (select 1 from comms.send_sms_task where send_sms_task_id = _id) then
            return jsonb_build_object('success', false,
                'validation_failure_message', format('send_sms_supervisor: send_sms_task %s does not exist', _id));
        end if;
        if not exists (select 1 from comms.send_sms_task_succeeded where send_sms_task_id = _id)
           and not exists (select 1 from comms.send_sms_task_failed where send_sms_task_id = _id and run = comms.send_sms_run(_id)) then
            insert into comms.send_sms_due as d (send_sms_task_id, due_at) values (_id, now())
            on conflict (send_sms_task_id) do update set due_at = least(d.due_at, excluded.due_at);
        end if;
    end if;

    -- Input
    _clean := queues.supervisor_tick_clean('comms.send_sms_supervisor');
    select array_agg(d.send_sms_task_id) into _ids
    from (select send_sms_task_id from comms.send_sms_due where due_at <= now()
          order by due_at limit 500 for update skip locked) d;
    if _ids is null then
        select min(due_at) into _next from comms.send_sms_due;
        perform queues.schedule_supervisor_tick('comms.send_sms_supervisor', _next);
        return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('instances', 0, 'clean', _clean));
    end if;
    select * into _cfg from comms.process_config where process = 'send_sms';

    insert into comms.send_sms_attempt_failed (send_sms_attempt_id, error_message)
    select a.send_sms_attempt_id,
           format('the sms task %s ended %s without recording an outcome%s', a.task_id,
                  coalesce(t.status::text, 'and was removed'), coalesce(': ' || t.last_error, ''))
    from comms.send_sms_attempt a
    left join queues.task t on t.task_id = a.task_id
    where a.send_sms_task_id = any (_ids)
      and (t.task_id is null or t.status in ('completed', 'failed', 'dead', 'cancelled'))
      and not exists (select 1 from comms.send_sms_attempt_succeeded s where s.send_sms_attempt_id = a.send_sms_attempt_id)
      and not exists (select 1 from comms.send_sms_attempt_failed f where f.send_sms_attempt_id = a.send_sms_attempt_id)
    on conflict do nothing;

    -- Compute
    with facts as (
        select r.send_sms_task_id as id, r.scheduled_at,
               exists (select 1 from comms.send_sms_task_succeeded x where x.send_sms_task_id = r.send_sms_task_id)
               or exists (select 1 from comms.send_sms_task_failed x where x.send_sms_task_id = r.send_sms_task_id and x.run >= coalesce(rs.run, 1)) as terminal,
               coalesce(a.attempts, 0) as attempts, coalesce(a.failures, 0) as failures,
               coalesce(a.succeeded, false) as succeeded, a.succeeded_at, a.last_fail, a.last_error, a.permanent_error,
               coalesce(a.delivered, false) as delivered, a.undelivered
        from comms.send_sms_task r
        -- The run: restarts by hand (retry_send_sms); only the attempts made since the last one count.
        left join lateral (
            select max(z.run) as run, max(z.last_attempt_id) as last_attempt_id
            from comms.send_sms_task_restarted z where z.send_sms_task_id = r.send_sms_task_id
        ) rs on true
        -- One pass over the instance's attempts (an index range), with their facts.
        left join lateral (
            select count(distinct a.send_sms_attempt_id) as attempts, count(distinct f.send_sms_attempt_id) as failures,
                   bool_or(s.send_sms_attempt_id is not null) as succeeded, min(s.created_at) as succeeded_at,
                   max(f.created_at) as last_fail,
                   (array_agg(f.error_message order by f.created_at desc) filter (where f.send_sms_attempt_id is not null))[1] as last_error,
                   -- A permanent failure (the provider said retrying cannot succeed) ends the run.
                   (array_agg(f.error_message order by f.created_at desc) filter (where f.error_class = 'permanent'))[1] as permanent_error,
                   coalesce(bool_or(d.send_sms_attempt_id is not null), false) as delivered,
                   (array_agg(b.status || coalesce(' (error ' || b.error_code || ')', '') || coalesce(': ' || b.reason, '') order by b.created_at) filter (where b.send_sms_attempt_id is not null))[1] as undelivered
            from comms.send_sms_attempt a
            left join comms.send_sms_attempt_succeeded s using (send_sms_attempt_id)
            left join comms.send_sms_attempt_failed f using (send_sms_attempt_id)
            left join comms.send_sms_attempt_delivered d using (send_sms_attempt_id)
            left join comms.send_sms_attempt_undelivered b using (send_sms_attempt_id)
            where a.send_sms_task_id = r.send_sms_task_id and a.send_sms_attempt_id > coalesce(rs.last_attempt_id, 0)
        ) a on true
        where r.send_sms_task_id = any (_ids)
    ), timed as (
        select f.*,
               greatest(f.scheduled_at, coalesce(f.last_fail, '-infinity')
                        + queues.process_backoff(f.failures::integer, _cfg.backoff_base, _cfg.backoff_max)) as next_try
        from facts f
    ), decided as (
        select t.id,
               case when t.terminal then 'done'
                    when t.succeeded and t.undelivered is not null then 'fail'
                    when t.succeeded and _cfg.delivery_wait is not null and not t.delivered
                         and t.succeeded_at + _cfg.delivery_wait > now() then 'later'
                    when t.succeeded then 'succeed'
                    when t.permanent_error is not null then 'fail'
                    when t.failures >= _cfg.max_attempts then 'fail'
                    when t.attempts = t.failures and t.next_try <= now() then 'attempt'
                    else 'later' end as action,
               case when t.succeeded then format('the provider reported the sms %s', t.undelivered)
                    else case when t.permanent_error is not null then format('permanent: sms not sent: %s', t.permanent_error)
                    else format('sms not sent after %s failed attempts (max %s); last error: %s',
                                t.failures, _cfg.max_attempts, coalesce(t.last_error, 'none')) end end as message,
               case when t.succeeded then t.succeeded_at + _cfg.delivery_wait
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
    insert into comms.send_sms_task_succeeded (send_sms_task_id) select unnest(_succeed) on conflict do nothing;
    insert into comms.send_sms_task_failed (send_sms_task_id, error_message) select * from unnest(_fail, _fail_msg) on conflict do nothing;
    delete from comms.send_sms_due where send_sms_task_id = any (coalesce(_done, '{}') || coalesce(_succeed, '{}') || coalesce(_fail, '{}'));
    update comms.send_sms_due d set due_at = l.at from unnest(_later, _later_at) as l(id, at) where d.send_sms_task_id = l.id;
    if _new is not null then
        with a as (
            insert into comms.send_sms_attempt (send_sms_task_id) select unnest(_new)
            returning send_sms_attempt_id, send_sms_task_id
        )
        select array_agg(send_sms_attempt_id order by send_sms_attempt_id) into _attempts from a;
        select array_agg(e.task_id order by e.ord) into _tasks
        from queues.enqueue_many_with_result(
            array_fill('sms'::text, array[cardinality(_attempts)]),
            (select array_agg(jsonb_build_object(
                        'send_sms_task_id', a.send_sms_task_id,
                        'send_sms_attempt_id', a.send_sms_attempt_id,
                        'before_handler', 'comms.get_sms_payload',
                        'success_handler', 'comms.record_sms_success',
                        'error_handler', 'comms.record_sms_failure') order by a.send_sms_attempt_id)
             from comms.send_sms_attempt a where a.send_sms_attempt_id = any (_attempts)),
            null, null, null, array_fill(5, array[cardinality(_attempts)])) with ordinality as e(task_id, duplicate, ord);
        update comms.send_sms_attempt a set task_id = x.task_id
        from unnest(_attempts, _tasks) as x(attempt_id, task_id) where a.send_sms_attempt_id = x.attempt_id;
        update comms.send_sms_due d set due_at = now() + _cfg.check_interval where d.send_sms_task_id = any (_new);
    end if;

    select min(due_at) into _next from comms.send_sms_due;
    perform queues.schedule_supervisor_tick('comms.send_sms_supervisor', _next);
    return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object(
        'instances', cardinality(_ids), 'clean', _clean,
        'succeeded', coalesce(cardinality(_succeed), 0), 'failed', coalesce(cardinality(_fail), 0),
        'new_attempts', coalesce(cardinality(_new), 0), 'next_tick_at', _next));
end $$;
revoke all on function comms.send_sms_supervisor(jsonb) from public;
grant execute on function comms.send_sms_supervisor(jsonb) to worker_service_user;
