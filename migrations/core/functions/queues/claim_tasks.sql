-- Claims up to _limit of the next pending, due tasks in claim order (priority, then run_at, then
-- task_id) for _worker_id, of _task_types when given, none of a paused type; a task of a
-- limited type is handed out only within its limit (queues.set_limit): when limits exist, the
-- limited candidates (internal.limited_claimable) join the unlimited ones and the first _limit of
-- both, in claim order, are leased. Every claim first returns expired leases
-- (queues.rescue_expired_leases). Returns the leased tasks (internal.lease_tasks).
create or replace function queues.claim_tasks(
    _worker_id text,
    _limit integer,
    _lease_duration interval default interval '5 minutes',
    _task_types text[] default null)
returns setof queues.task
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _paused text[];
    _limited text[];
    _ids bigint[];
    _lim bigint[];
    _clock timestamptz;
begin
    if _limit is null or _limit < 1 then
        raise exception 'claim_tasks: _limit must be at least 1, got %', _limit using errcode = 'invalid_parameter_value';
    end if;
    if _lease_duration is null or _lease_duration <= interval '0' then
        raise exception 'claim_tasks: _lease_duration must be positive, got %', _lease_duration
            using errcode = 'invalid_parameter_value';
    end if;

    perform queues.rescue_expired_leases();

    _paused := array(select qp.task_type from queues.queue_pause qp);

    _limited := array(select l.task_type from queues.task_limit l);

    -- Unlimited tasks: no limit governs them, and their type has none either (without limits,
    -- every pending task), in claim order (internal.unlimited_claimable reads the claim index one
    -- priority at a time, and no task that is not due).
    _ids := internal.unlimited_claimable(_limited, _task_types, _paused, _limit);

    if cardinality(_limited) > 0 then
        _clock := clock_timestamp();
        _lim := internal.limited_claimable(_limited, _task_types, _paused, _limit, _clock);
        if cardinality(_lim) > 0 then
            _ids := array(
                select t.task_id from queues.task t
                where t.task_id = any (_ids || _lim)
                order by t.priority desc, t.run_at, t.task_id
                limit _limit);
        end if;
    end if;
    if cardinality(_ids) = 0 then
        return;
    end if;

    return query select * from internal.lease_tasks(_worker_id, _ids, _lease_duration);
    if cardinality(_lim) > 0 then
        -- At the lease's time, after it (internal.take_limit_tokens).
        perform internal.take_limit_tokens(_ids, _clock);
    end if;
end $$;
revoke all on function queues.claim_tasks(text, integer, interval, text[]) from public;
grant execute on function queues.claim_tasks(text, integer, interval, text[]) to worker_service_user;
