-- Takes or renews the leader lease for _ttl (at most an hour) and returns the term, or NULL
-- when another worker holds it. Only a registered, live worker leads: its row exists (for
-- _instance, when given) and its session, if it has one on this server, is alive; otherwise
-- NULL. The lease is free when nobody holds it, it expired, or its holder is gone: no longer
-- registered, or its session is gone (then the holder's tasks' grace starts now). Followers call
-- it often: while the leader lives it only reads.
create or replace function queues.acquire_leadership(_worker_id text, _ttl interval, _instance text) returns bigint
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _me queues.worker;
    _held queues.leader;
    _holder queues.worker;
    _holder_gone boolean := false;
    _term bigint;
begin
    if _worker_id is null or btrim(_worker_id) = '' then
        raise exception 'acquire_leadership: _worker_id must not be empty' using errcode = 'invalid_parameter_value';
    end if;
    if _ttl is null or _ttl <= interval '0' or _ttl > interval '1 hour' then
        raise exception 'acquire_leadership: _ttl must be positive and at most 1 hour, got %', _ttl
            using errcode = 'invalid_parameter_value';
    end if;
    -- A follower's call while the leader lives ends here, having read two rows.
    select * into _held from queues.leader l where l.name = 'default';
    if found and _held.worker_id is not null and _held.worker_id <> _worker_id and _held.expires_at > now() then
        select * into _holder from queues.worker w where w.worker_id = _held.worker_id;
        if found and internal.worker_session_state(_holder.session_key, _holder.session_epoch) <> 'gone' then
            return null;
        end if;
        _holder_gone := true;
    end if;
    select * into _me from queues.worker w where w.worker_id = _worker_id;
    if not found or (_instance is not null and _me.instance is distinct from _instance)
       or internal.worker_session_state(_me.session_key, _me.session_epoch) = 'gone' then
        return null;
    end if;

    -- Under the row's lock the condition is checked again: another worker may have moved first.
    insert into queues.leader as l (name, worker_id, term, elected_at, expires_at)
    values ('default', _worker_id, 1, now(), now() + _ttl)
    on conflict (name) do update
    set term = case when l.worker_id = excluded.worker_id then l.term else l.term + 1 end,
        elected_at = case when l.worker_id = excluded.worker_id then l.elected_at else now() end,
        worker_id = excluded.worker_id,
        expires_at = excluded.expires_at
    where l.worker_id = excluded.worker_id or l.worker_id is null or l.expires_at <= now()
       or (_holder_gone and l.worker_id = _held.worker_id and l.term = _held.term)
    returning l.term into _term;
    if _term is not null and _holder_gone then
        update queues.worker w set session_lost_at = now()
        where w.worker_id = _held.worker_id and w.session_key is not null and w.session_lost_at is null;
    end if;
    return _term;
end $$;
revoke all on function queues.acquire_leadership(text, interval, text) from public;
grant execute on function queues.acquire_leadership(text, interval, text) to worker_service_user;

-- queues.acquire_leadership for any process of _worker_id (workers of older versions, tools).
create or replace function queues.acquire_leadership(_worker_id text, _ttl interval) returns bigint
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    select queues.acquire_leadership(_worker_id, _ttl, null)
$$;
revoke all on function queues.acquire_leadership(text, interval) from public;
grant execute on function queues.acquire_leadership(text, interval) to worker_service_user;
