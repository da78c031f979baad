-- queues.run_task_handlers, the success handlers the completer runs with its completions: it
-- locks every lease first and then runs the handlers through internal.run_functions, each
-- distinct handler checked once and called for all its tasks in one query. A handler that raises
-- aborts the whole call, and the worker then runs each task of the batch on its own.
create or replace function queues.run_task_handlers(_task_ids bigint[], _lease_ids bigint[], _handlers text[], _bodies jsonb[])
returns table (task_id bigint, held boolean, envelope jsonb)
language plpgsql volatile security invoker set search_path = pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    _n    integer := coalesce(cardinality(_task_ids), 0);
    _held integer[];  -- the positions whose lease is held, in order
begin
    if coalesce(cardinality(_lease_ids), 0) <> _n or coalesce(cardinality(_handlers), 0) <> _n
       or coalesce(cardinality(_bodies), 0) <> _n then
        raise exception 'run_task_handlers: % task ids, % lease ids, % handlers and % bodies; expected one of each per task',
            _n, coalesce(cardinality(_lease_ids), 0), coalesce(cardinality(_handlers), 0), coalesce(cardinality(_bodies), 0)
            using errcode = 'invalid_parameter_value';
    end if;
    _held := array[]::integer[];
    for _i in 1 .. _n loop
        if queues.lock_lease(_task_ids[_i], _lease_ids[_i]) then
            _held := _held || _i;
        else
            task_id := _task_ids[_i];
            held := false;
            envelope := null;
            return next;
        end if;
    end loop;
    if cardinality(_held) = 0 then
        return;
    end if;
    return query
        select _task_ids[_held[r.ord]], true, r.result
        from internal.run_functions(
            array(select _handlers[h] from unnest(_held) with ordinality as u(h, k) order by k),
            array(select _bodies[h] from unnest(_held) with ordinality as u(h, k) order by k)) as r;
end $$;
revoke all on function queues.run_task_handlers(bigint[], bigint[], text[], jsonb[]) from public;
grant execute on function queues.run_task_handlers(bigint[], bigint[], text[], jsonb[]) to worker_service_user;
