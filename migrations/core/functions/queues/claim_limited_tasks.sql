-- Claims up to _limit tasks of limited types only, within their limits, as claim_tasks would
-- (same arguments and results). A worker whose tasks arrive over a transport claims limited tasks
-- with it, since dispatch_tasks does not send them.
create or replace function queues.claim_limited_tasks(
    _worker_id text,
    _limit integer,
    _lease_duration interval default interval '5 minutes',
    _task_types text[] default null)
returns setof queues.task
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _limited text[] := array(select l.task_type from queues.task_limit l);
    _ids bigint[];
    _clock timestamptz;
begin
    if _limit is null or _limit < 1 then
        raise exception 'claim_limited_tasks: _limit must be at least 1, got %', _limit using errcode = 'invalid_parameter_value';
    end if;
    if _lease_duration is null or _lease_duration <= interval '0' then
        raise exception 'claim_limited_tasks: _lease_duration must be positive, got %', _lease_duration
            using errcode = 'invalid_parameter_value';
    end if;
    if cardinality(_limited) = 0 then
        return;
    end if;
    perform queues.rescue_expired_leases();
    _clock := clock_timestamp();
    _ids := internal.limited_claimable(_limited, _task_types, array(select qp.task_type from queues.queue_pause qp),
                                       _limit, _clock);
    if cardinality(_ids) = 0 then
        return;
    end if;
    return query select * from internal.lease_tasks(_worker_id, _ids, _lease_duration);
    perform internal.take_limit_tokens(_ids, _clock); -- at the lease's time, after it

end $$;
revoke all on function queues.claim_limited_tasks(text, integer, interval, text[]) from public;
grant execute on function queues.claim_limited_tasks(text, integer, interval, text[]) to worker_service_user;
