-- The worker's side of the SQL API, beyond claim/complete/fail (0002): locking a lease inside
-- the worker's own transaction, recording an error under a lease, and giving tasks back on
-- shutdown. All fenced by the lease; all SECURITY DEFINER with a fixed search_path.

-- Locks a running task's row for the rest of the caller's transaction, if the lease still holds
-- it. The worker takes this lock before running a db_function (or a success/error handler) and
-- completes in the same transaction: the function's writes and the task's outcome commit
-- together, and nobody can take the task over in between (rescue and reaping skip locked rows).
-- False when the lease is lost; nothing is locked then.
create function queues.lock_lease(_task_id bigint, _lease_id bigint) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    perform 1 from queues.task
    where task_id = _task_id and lease_id = _lease_id and lease_expires_at is not null  -- i.e. running
    for update;
    return found;
end $$;

-- Records an error against a task the caller holds a lease on (for outcomes that are not a
-- failure of the attempt: a supervisor's named non-success status, a before handler's refusal).
-- Bounded to 8 KiB. False, and nothing recorded, when the lease is not the task's current one.
create function queues.record_error(_task_id bigint, _lease_id bigint, _error_message text, _context jsonb default null)
returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _worker text;
begin
    select worker_id into _worker from queues.task where task_id = _task_id and lease_id = _lease_id;
    if not found then
        return false;
    end if;
    insert into queues.error (task_id, error_message, context)
    values (_task_id, left(coalesce(nullif(_error_message, ''), 'unknown error'), 8192),
            case when jsonb_typeof(_context) = 'object' then _context else '{}'::jsonb end
              || jsonb_build_object('lease_id', _lease_id, 'worker_id', _worker));
    return true;
end $$;

-- Gives running tasks back to pending, due now, without spending the attempt (a worker shutting
-- down with work it will not finish). Returns the ids released; tasks whose lease is no longer
-- the given one are left alone.
create function queues.release_tasks(_task_ids bigint[], _lease_ids bigint[], _reason text default null)
returns setof bigint
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    return query
    with rel as (
        update queues.task t
        set status = 'pending', run_at = now(), lease_expires_at = null, attempt = greatest(t.attempt - 1, 0)
        from unnest(_task_ids, _lease_ids) as c(task_id, lease_id)
        where t.task_id = c.task_id and t.lease_id = c.lease_id and t.lease_expires_at is not null  -- i.e. running
        returning t.task_id, t.lease_id, t.worker_id, t.attempt
    ), ev as (
        insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
        select r.task_id, 'released', 'running', 'pending', r.lease_id, r.worker_id, r.attempt + 1,
               coalesce(left(nullif(_reason, ''), 1024), 'released by its worker')
        from rel r
    )
    select r.task_id from rel r;
end $$;

-- What is applied, for a worker's readiness check: the worker role cannot read the bookkeeping
-- table itself.
create function queues.applied_migrations()
returns table (migration_set text, version integer, checksum text)
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select m.migration_set, m.version, m.checksum from queues.schema_migration m order by 1, 2
$$;

revoke all on function
    queues.applied_migrations(),
    queues.lock_lease(bigint, bigint),
    queues.record_error(bigint, bigint, text, jsonb),
    queues.release_tasks(bigint[], bigint[], text)
from public;
grant execute on function
    queues.applied_migrations(),
    queues.lock_lease(bigint, bigint),
    queues.record_error(bigint, bigint, text, jsonb),
    queues.release_tasks(bigint[], bigint[], text)
to worker_service_user;
