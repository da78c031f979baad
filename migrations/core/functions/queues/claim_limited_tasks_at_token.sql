-- Claims as queues.claim_limited_tasks does (same first four arguments and results), after
-- waiting in the database, up to _max_wait (at most 1 second), for the next token of a rate limit
-- of _task_types (docs/limits.md, "Waiting for the token"): a claim that comes early for its
-- token is then in the database when the token comes, and takes it at once, however late its
-- worker would have been to send a claim at that moment. When a token is there, or no rate limit
-- holds a due task, it claims at once; when the next token comes later than _max_wait, it returns
-- nothing at once (the worker asks queues.limit_wait how long to wait).
--
-- It sleeps until the token of the limit whose token comes first, holding no lock, then locks
-- that limit's row (SKIP LOCKED), chooses its tasks by the bucket then, leases them and takes
-- the token at the lease's time (internal.take_limit_tokens), as every claim does: the bucket
-- never gives what it does not hold. Several claims asleep for one token race for it when it
-- comes, and the first awake takes it, so a backend late to wake costs nothing while another is
-- on time; the others, in a subtransaction that lets go of the row at once, look again and sleep
-- until the next token, within their _max_wait. The row is held only while leasing, as by any
-- claim: claims of other limits and of unlimited types are never held up. A pause of the type
-- that commits during the wait stops it. The wait holds a snapshot for at most _max_wait.
create or replace function queues.claim_limited_tasks_at_token(
    _worker_id text,
    _limit integer,
    _lease_duration interval default interval '5 minutes',
    _task_types text[] default null,
    _max_wait interval default interval '250 milliseconds')
returns setof queues.task
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _paused text[];
    _deadline timestamptz;
    _name text;
    _wait double precision;
    _clock timestamptz;
    _ids bigint[];
    _rows queues.task[];
    _busy boolean;
begin
    if _worker_id is null or btrim(_worker_id) = '' then
        raise exception 'claim_limited_tasks_at_token: _worker_id must name the claiming worker, got %',
            coalesce(quote_literal(_worker_id), 'NULL') using errcode = 'invalid_parameter_value';
    end if;
    if _limit is null or _limit < 1 then
        raise exception 'claim_limited_tasks_at_token: _limit must be at least 1, got %', _limit using errcode = 'invalid_parameter_value';
    end if;
    if _lease_duration is null or _lease_duration <= interval '0' then
        raise exception 'claim_limited_tasks_at_token: _lease_duration must be positive, got %', _lease_duration
            using errcode = 'invalid_parameter_value';
    end if;
    if _max_wait is null or _max_wait < interval '0' or _max_wait > interval '1 second' then
        raise exception 'claim_limited_tasks_at_token: _max_wait must be between 0 and 1 second, got %', _max_wait
            using errcode = 'invalid_parameter_value';
    end if;
    _deadline := clock_timestamp() + _max_wait;
    _paused := array(select qp.task_type from queues.queue_pause qp);
    select n.limit_name, n.seconds into _name, _wait from internal.next_limit_token(_task_types, _paused) n;
    if _name is null or _wait <= 0 then
        return query select * from queues.claim_limited_tasks(_worker_id, _limit, _lease_duration, _task_types);
        return;
    end if;
    -- Every claim returns expired leases first (and takes queues.task before a limit's row, in
    -- the order every claim takes them).
    perform queues.rescue_expired_leases();
    loop
        if _wait is null or clock_timestamp() + make_interval(secs => greatest(_wait, 0)) > _deadline then
            return; -- no due task left, or the token is further off than the wait allows
        end if;
        if _wait > 0 then
            perform pg_sleep(_wait);
        end if;
        if exists (select from queues.queue_pause qp
                   where qp.task_type = internal.limit_task_type(_name) or qp.task_type = _name) then
            return; -- paused while it waited
        end if;
        -- The token is due: the first claim to wake takes it. In a subtransaction, so that a claim
        -- that finds it taken lets go of the limit's row at once.
        begin
            perform from queues.task_limit l where l.task_type = _name for update skip locked;
            if not found then
                raise exception using errcode = 'TO001'; -- another claim holds the row: look again
            end if;
            _clock := clock_timestamp();
            _ids := internal.limited_claimable(array[_name], _task_types, _paused, _limit, _clock);
            if cardinality(_ids) = 0 then
                raise exception using errcode = 'TO002'; -- taken already, or nothing to take
            end if;
            _rows := array(select t from internal.lease_tasks(_worker_id, _ids, _lease_duration) t);
            perform internal.take_limit_tokens(_ids, _clock); -- at the lease's time, after it
            _busy := false;
        exception when sqlstate 'TO001' then
            _busy := true;
            perform pg_sleep(0.001);
        when sqlstate 'TO002' then
            _busy := false;
        end;
        if _rows is not null then
            return query select (unnest(_rows)).*;
            return;
        end if;
        select n.seconds into _wait from internal.next_limit_token(_task_types, _paused, _name) n;
        if _wait <= 0 and not _busy then
            -- A token is there that this claim could not take (the tasks another claim holds,
            -- running slots): not worth waiting on.
            return;
        end if;
    end loop;
end $$;
revoke all on function queues.claim_limited_tasks_at_token(text, integer, interval, text[], interval) from public;
grant execute on function queues.claim_limited_tasks_at_token(text, integer, interval, text[], interval) to worker_service_user;
