-- The heartbeat path of orphan recovery (the leader's): deletes the workers whose heartbeat is
-- older than _timeout and returns their running tasks, with the cause in the error rows'
-- context ('heartbeat_timeout'; the session path records 'session_lost', a takeover
-- 'worker_restarted'). It applies to every worker, with a session or not: a stopped or
-- partitioned worker keeps its session alive, and only its silence tells. The tasks it makes
-- dead are counted in queues.task_dead_tally.
create or replace function queues.reap_dead_workers(_timeout interval, _term bigint)
returns table (worker_id text, last_heartbeat timestamptz, tasks_recovered integer, tasks_dead integer)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
-- Plans for the values of this call: a generic plan guesses the batch size and could pick
-- sequential scans of the task table.
set plan_cache_mode = force_custom_plan as $$
#variable_conflict use_column
declare
    _leader text;
begin
    if _timeout is null or _timeout <= interval '0' then
        raise exception 'reap_dead_workers: timeout must be positive, got %', _timeout
            using errcode = 'invalid_parameter_value';
    end if;
    if not internal.holds_leader_term(_term) then
        return;
    end if;
    select l.worker_id into _leader from queues.leader l where l.name = 'default';

    return query
    with dead as materialized (
        select w.worker_id, w.last_heartbeat
        from queues.worker w
        where w.last_heartbeat < now() - _timeout
          and w.worker_id <> _leader
        for update skip locked
    ), picked as (
        -- The running tasks: a scan of the partial index of running tasks, which is small.
        select t.task_id, d.last_heartbeat
        from queues.task t
        join dead d on d.worker_id = t.worker_id
        where t.status = 'running' and t.lease_expires_at is not null
        for update of t skip locked
    ), upd as (
        update queues.task t
        set status = case when t.attempt >= t.max_attempts then 'dead'::queues.task_status else 'pending' end,
            dead_at = case when t.attempt >= t.max_attempts then now() else t.dead_at end,
            run_at = case when t.attempt >= t.max_attempts then t.run_at else now() end,
            lease_expires_at = null,
            last_error = format('worker %s stopped heartbeating (last heartbeat %s, timeout %s): lease %s recovered, attempt %s of %s',
                                t.worker_id, p.last_heartbeat, _timeout, t.lease_id, t.attempt, t.max_attempts)
        from picked p
        where t.task_id = p.task_id
        returning t.task_id, t.task_type, t.status, t.lease_id, t.worker_id, t.attempt, t.max_attempts, t.last_error, p.last_heartbeat
    ), tally as (
        insert into queues.task_dead_tally as d (task_type, dead)
        select u.task_type, count(*) from upd u where u.status = 'dead' group by u.task_type
        on conflict (task_type) do update set dead = d.dead + excluded.dead
    ), ev as (
        insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
        select u.task_id, 'recovered', 'running', u.status, u.lease_id, u.worker_id, u.attempt, u.last_error
        from upd u
    ), err as (
        insert into queues.error (task_id, error_message, context)
        select u.task_id, u.last_error,
               jsonb_build_object('operation', 'recovered', 'cause', 'heartbeat_timeout', 'worker_id', u.worker_id,
                                  'last_heartbeat', u.last_heartbeat, 'worker_timeout', _timeout::text,
                                  'lease_id', u.lease_id, 'attempt', u.attempt,
                                  'max_attempts', u.max_attempts, 'outcome', u.status, 'term', _term)
        from upd u
    ), gone as (
        delete from queues.worker w
        using dead d
        where w.worker_id = d.worker_id
        returning w.worker_id, w.last_heartbeat
    )
    select g.worker_id, g.last_heartbeat,
           count(u.task_id)::integer,
           (count(u.task_id) filter (where u.status = 'dead'))::integer
    from gone g
    left join upd u on u.worker_id = g.worker_id
    group by g.worker_id, g.last_heartbeat
    order by g.worker_id;
end $$;
revoke all on function queues.reap_dead_workers(interval, bigint) from public;
grant execute on function queues.reap_dead_workers(interval, bigint) to worker_service_user;
