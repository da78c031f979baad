-- Completes tasks under their leases, without results: queues.complete_tasks_with_results with
-- none (one completion body). Returns the tasks completed (repeats under the completing lease
-- included); refusals are recorded in queues.error; arrays of different lengths raise.
create or replace function queues.complete_tasks(_task_ids bigint[], _lease_ids bigint[])
returns setof bigint
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if coalesce(cardinality(_task_ids), 0) <> coalesce(cardinality(_lease_ids), 0) then
        raise exception 'complete_tasks: % task ids but % lease ids', cardinality(_task_ids), cardinality(_lease_ids)
            using errcode = 'invalid_parameter_value';
    end if;
    return query select c.task_id from queues.complete_tasks_with_results(_task_ids, _lease_ids, null) c;
end $$;
revoke all on function queues.complete_tasks(bigint[], bigint[]) from public;
grant execute on function queues.complete_tasks(bigint[], bigint[]) to worker_service_user;
