-- Dashboard sessions that were signed out (docs/dashboard.md, "Sessions").
--
-- A dashboard session is a signed cookie that any dashboard process holding the same secret key
-- accepts, so signing out must be known to all of them: the dashboard records the session's id
-- here, and every request that comes with a session cookie asks whether its id was revoked. A
-- row is needed only until the session would have expired anyway; each sign-out deletes the
-- rows past that, so the table holds at most the sign-outs of the last session lifetime.
--
-- Granted to nobody: the dashboard's role needs EXECUTE on both functions for sign-in sessions
-- (the schema's owner has it); bearer-token and basic-auth requests do not use them.

create table queues.dashboard_session_revoked (
    session_id text primary key,
    revoked_at timestamptz not null default now(),
    expires_at timestamptz not null,
    constraint dashboard_session_revoked_expires_finite check (isfinite(expires_at))
);
revoke all on queues.dashboard_session_revoked from public;
comment on table queues.dashboard_session_revoked is
    'Dashboard sessions signed out before they expired: a cookie naming one of these ids is refused by every dashboard process. Written by queues.revoke_dashboard_session, read by queues.dashboard_session_revoked; a row goes at the first sign-out after expires_at.';

create function queues.revoke_dashboard_session(_session_id text, _expires_at timestamptz)
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
revoke all on function queues.revoke_dashboard_session(text, timestamptz) from public;
comment on function queues.revoke_dashboard_session(text, timestamptz) is
    'Signs a dashboard session out for every dashboard process: its id is refused until _expires_at (the session''s own expiry), after which the cookie is refused anyway.';

create function queues.dashboard_session_revoked(_session_id text)
returns boolean
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select exists (select from queues.dashboard_session_revoked r where r.session_id = _session_id)
$$;
revoke all on function queues.dashboard_session_revoked(text) from public;
comment on function queues.dashboard_session_revoked(text) is
    'Whether a dashboard session was signed out (queues.revoke_dashboard_session).';
