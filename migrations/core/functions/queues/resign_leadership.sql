-- Gives up the lease now (a leader shutting down), so another worker takes over at its next try
-- instead of after the lease expires. True when _worker_id was the leader.
create or replace function queues.resign_leadership(_worker_id text) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    update queues.leader set worker_id = null, expires_at = now()
    where name = 'default' and worker_id = _worker_id;
    return found;
end $$;
revoke all on function queues.resign_leadership(text) from public;
grant execute on function queues.resign_leadership(text) to worker_service_user;
