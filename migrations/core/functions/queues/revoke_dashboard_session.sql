-- Signs a dashboard session out for every dashboard process (see the comment below).
create or replace function queues.revoke_dashboard_session(_session_id text, _expires_at timestamptz)
returns void
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _session_id is null or _session_id !~ '^[A-Za-z0-9_-]{16,128}$' then
        raise exception 'revoke_dashboard_session: _session_id must be 16 to 128 characters of A-Z a-z 0-9 _ -, got %',
            coalesce(to_jsonb(left(_session_id, 130))::text, 'NULL') using errcode = 'invalid_parameter_value';
    end if;
    if _expires_at is null or not isfinite(_expires_at) then
        raise exception 'revoke_dashboard_session: _expires_at must be a finite time, got %', coalesce(_expires_at::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    delete from queues.dashboard_session_revoked where expires_at <= now();
    if _expires_at > now() then
        insert into queues.dashboard_session_revoked (session_id, expires_at)
        values (_session_id, _expires_at)
        on conflict (session_id) do nothing;
    end if;
end $$;
revoke all on function queues.revoke_dashboard_session(text, timestamp with time zone) from public;
comment on function queues.revoke_dashboard_session(text, timestamp with time zone) is 'Signs a dashboard session out for every dashboard process: its id is refused until _expires_at (the session''s own expiry), after which the cookie is refused anyway.';
