-- True when _term is the current, unexpired leader term. Locks the leader row FOR SHARE until
-- the caller's transaction ends, so a change of leader (an UPDATE of that row) waits for a
-- leader action in progress: nothing done under term T commits after term T+1 has begun.
create or replace function internal.holds_leader_term(_term bigint) returns boolean
language plpgsql volatile set search_path = pg_catalog, pg_temp as $$
begin
    perform
    from queues.leader l
    where l.name = 'default' and l.term = _term and l.worker_id is not null and l.expires_at > now()
    for share;
    return found;
end $$;
revoke all on function internal.holds_leader_term(bigint) from public;
