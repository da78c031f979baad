-- Claims, of the given tasks (those a transport delivered), those pending and due; a task of a
-- limited type is leased only within its limit.
create or replace function queues.claim_tasks_by_id(
    _worker_id text,
    _task_ids bigint[],
    _lease_duration interval default interval '5 minutes',
    _task_types text[] default null)
returns setof queues.task
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp set enable_sort = off set jit = off as $$
declare
    _paused text[];
    _ids bigint[];
    _limited text[];
    _lim bigint[];
    _clock timestamptz;
begin
    if _lease_duration is null or _lease_duration <= interval '0' then
        raise exception 'claim_tasks_by_id: _lease_duration must be positive, got %', _lease_duration
            using errcode = 'invalid_parameter_value';
    end if;
    if coalesce(cardinality(_task_ids), 0) = 0 then
        return;
    end if;

    -- A message redelivered after its worker died finds the task still running under an
    -- expired lease: rescue first, as claim_tasks does (cheap when nothing has expired).
    perform queues.rescue_expired_leases();

    _paused := array(select qp.task_type from queues.queue_pause qp);

    _ids := array(
        select t.task_id
        from queues.task t
        where t.task_id = any (_task_ids)
          and t.status = 'pending'
          and t.run_at <= now()
          and (_task_types is null or t.task_type = any (_task_types))
          and (cardinality(_paused) = 0 or (t.task_type <> all (_paused) and (t.key_scope = '' or t.task_type || ':' || t.key_scope <> all (_paused))))
          and t.limit_name is null
          and not exists (select from queues.task_limit l where l.task_type = t.task_type)
        order by t.task_id
        for update);

    _limited := array(
        select l.task_type from queues.task_limit l
        where exists (select from queues.task t where t.task_id = any (_task_ids) and t.limit_name = l.task_type)
          and (_task_types is null or internal.limit_task_type(l.task_type) = any (_task_types))
          and (cardinality(_paused) = 0 or (internal.limit_task_type(l.task_type) <> all (_paused) and l.task_type <> all (_paused))));
    if cardinality(_limited) > 0 then
        _clock := clock_timestamp();
        _lim := array(select internal.limited_candidates(_limited, cardinality(_task_ids), _task_ids, _clock));
        if cardinality(_lim) > 0 then
            _ids := _ids || _lim;
        end if;
    end if;
    if cardinality(_ids) = 0 then
        return;
    end if;

    return query select * from internal.lease_tasks(_worker_id, _ids, _lease_duration);
    if cardinality(_lim) > 0 then
        perform internal.take_limit_tokens(_lim, _clock); -- at the lease's time, after it
    end if;
end $$;
revoke all on function queues.claim_tasks_by_id(text, bigint[], interval, text[]) from public;
grant execute on function queues.claim_tasks_by_id(text, bigint[], interval, text[]) to worker_service_user;
