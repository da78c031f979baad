-- Gives back every running task of a worker (its graceful stop); returns the tasks released.
create or replace function queues.release_worker_tasks(_worker_id text, _reason text default null)
returns setof bigint
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _ids bigint[];
    _leases bigint[];
begin
    if _worker_id is null or btrim(_worker_id) = '' then
        raise exception 'release_worker_tasks: _worker_id must name a worker, got %', coalesce(quote_literal(_worker_id), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    select array_agg(t.task_id order by t.task_id), array_agg(t.lease_id order by t.task_id)
    into _ids, _leases
    from queues.task t
    where t.status = 'running' and t.worker_id = _worker_id;
    if _ids is null then
        return;
    end if;
    return query select r.id from queues.release_tasks(_ids, _leases, _reason) as r(id);
end $$;
revoke all on function queues.release_worker_tasks(text, text) from public;
grant execute on function queues.release_worker_tasks(text, text) to worker_service_user;
