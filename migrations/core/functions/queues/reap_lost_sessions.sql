-- The session path of orphan recovery, run by the leader every 250 ms. Finds the workers whose
-- session is gone (never the leader itself), marks when it first saw each gone
-- (session_lost_at), and once that is older than _grace recovers their running tasks
-- (internal.recover_worker_tasks) and deletes them; a worker whose tasks could not all be
-- locked is kept, for the next call. Nothing while the leader's own session is gone: when the
-- connections of everyone were cut (a proxy restarted, the network flapped), what the leader
-- sees says nothing until it is back, and the others get the grace from then. Returns one row
-- per worker whose tasks were recovered; none when _term is not the current leader term, and no
-- write at all while every session is alive.
create or replace function queues.reap_lost_sessions(_grace interval, _term bigint)
returns table (worker_id text, session_lost_at timestamptz, tasks_recovered integer, tasks_dead integer)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    _leader queues.worker;
    _gone text[];
    _due text[] := '{}';
    _w record;
    _ids text[];
    _statuses queues.task_status[];
begin
    if _grace is null or _grace < interval '0' or _grace > interval '1 hour' then
        raise exception 'reap_lost_sessions: _grace must be between 0 and 1 hour, got %', _grace
            using errcode = 'invalid_parameter_value';
    end if;
    -- Reads first: while every session lives (nearly always) the call ends here, having taken
    -- no row lock, so no transaction id and no WAL flush at its commit.
    select w.* into _leader
    from queues.leader l join queues.worker w on w.worker_id = l.worker_id
    where l.name = 'default' and l.term = _term;
    if not found or internal.worker_session_state(_leader.session_key, _leader.session_epoch) = 'gone' then
        return;
    end if;
    _gone := array(
        select w.worker_id from queues.worker w
        where w.worker_id <> _leader.worker_id and w.session_key is not null
          and internal.worker_session_state(w.session_key, w.session_epoch) = 'gone');
    if cardinality(_gone) = 0 or not internal.holds_leader_term(_term) then
        return;
    end if;

    for _w in
        select w.worker_id, w.session_key, w.session_epoch, w.session_lost_at
        from queues.worker w
        where w.worker_id = any (_gone)
        for update skip locked
    loop
        -- Locked now: it may have registered a new session meanwhile.
        continue when internal.worker_session_state(_w.session_key, _w.session_epoch) <> 'gone';
        if _w.session_lost_at is null then
            update queues.worker w set session_lost_at = now() where w.worker_id = _w.worker_id;
            _w.session_lost_at := now();
        end if;
        if _w.session_lost_at <= now() - _grace then
            _due := _due || _w.worker_id;
        end if;
    end loop;
    if cardinality(_due) = 0 then
        return;
    end if;

    select coalesce(array_agg(r.worker_id), '{}'), coalesce(array_agg(r.status), '{}')
    into _ids, _statuses
    from internal.recover_worker_tasks(_due,
        'worker %1$s lost its database session: lease %2$s recovered, attempt %3$s of %4$s',
        jsonb_build_object('cause', 'session_lost', 'term', _term, 'grace', _grace::text)) r;

    return query
    with gone as (
        delete from queues.worker w
        where w.worker_id = any (_due)
          and not exists (select from queues.task t
                          where t.worker_id = w.worker_id and t.status = 'running' and t.lease_expires_at is not null)
        returning w.worker_id, w.session_lost_at
    ), counted as (
        select d.worker_id,
               count(*) filter (where r.worker_id is not null)::integer as recovered,
               count(*) filter (where r.status = 'dead')::integer as dead
        from unnest(_due) as d(worker_id)
        left join unnest(_ids, _statuses) as r(worker_id, status) on r.worker_id = d.worker_id
        group by d.worker_id
    )
    select c.worker_id, w.session_lost_at, c.recovered, c.dead
    from counted c
    left join queues.worker w on w.worker_id = c.worker_id
    left join gone g on g.worker_id = c.worker_id
    where c.recovered > 0 or g.worker_id is not null
    order by c.worker_id;
end $$;
revoke all on function queues.reap_lost_sessions(interval, bigint) from public;
grant execute on function queues.reap_lost_sessions(interval, bigint) to worker_service_user;
