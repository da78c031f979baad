-- A heartbeat of one worker process that also tells it what to do: 'gone' when its row is gone
-- (reaped) or another process took its id over (it registers again), 'quiet' when an operator
-- quieted it (queues.quiet_worker: it finishes what it runs and claims nothing more), 'active'
-- otherwise. One UPDATE of its row and one index probe.
create or replace function queues.heartbeat_worker_state(_worker_id text, _instance text) returns text
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    update queues.worker set last_heartbeat = now() where worker_id = _worker_id and instance = _instance;
    if not found then
        return 'gone';
    end if;
    if exists (select 1 from queues.worker_quiet q where q.worker_id = _worker_id and q.instance = _instance) then
        return 'quiet';
    end if;
    return 'active';
end $$;
revoke all on function queues.heartbeat_worker_state(text, text) from public;
grant execute on function queues.heartbeat_worker_state(text, text) to worker_service_user;
comment on function queues.heartbeat_worker_state(text, text) is
    'A worker process''s heartbeat: ''gone'' when its row is gone or its id taken over (register again), ''quiet'' when quieted by an operator (claim nothing more), ''active'' otherwise.';
