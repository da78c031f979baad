-- Success handlers in batches (docs/worker.md, "Completions"). A channel task whose provider
-- call succeeded is handed to the worker's completer with its success handler; the completer
-- runs the handlers of everything that finished since its last write in one transaction, with
-- their completions: begin, queues.run_task_handlers, complete, commit. Each handler still
-- commits with its own task's completion and under its lease, so its writes happen exactly once.
--
-- For each task in order: lock its lease (queues.lock_lease); when held, run the handler with
-- its body through internal.run_function, as the worker's role (security invoker: the runner's
-- whitelist applies). Returns one row per task: held (false: the lease was lost, nothing run)
-- and the handler's envelope. A handler that raises aborts the whole call: the worker then
-- rolls back and runs each task of the batch on its own, where the raising one fails alone.
create function queues.run_task_handlers(_task_ids bigint[], _lease_ids bigint[], _handlers text[], _bodies jsonb[])
returns table (task_id bigint, held boolean, envelope jsonb)
language plpgsql volatile security invoker set search_path = pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    _n integer := coalesce(cardinality(_task_ids), 0);
begin
    if coalesce(cardinality(_lease_ids), 0) <> _n or coalesce(cardinality(_handlers), 0) <> _n
       or coalesce(cardinality(_bodies), 0) <> _n then
        raise exception 'run_task_handlers: % task ids, % lease ids, % handlers and % bodies; expected one of each per task',
            _n, coalesce(cardinality(_lease_ids), 0), coalesce(cardinality(_handlers), 0), coalesce(cardinality(_bodies), 0)
            using errcode = 'invalid_parameter_value';
    end if;
    for _i in 1 .. _n loop
        task_id := _task_ids[_i];
        held := queues.lock_lease(_task_ids[_i], _lease_ids[_i]);
        envelope := case when held then internal.run_function(_handlers[_i], _bodies[_i]) end;
        return next;
    end loop;
end $$;

revoke all on function queues.run_task_handlers(bigint[], bigint[], text[], jsonb[]) from public;
grant execute on function queues.run_task_handlers(bigint[], bigint[], text[], jsonb[]) to worker_service_user;
