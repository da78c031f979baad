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
-- The functions, queues.revoke_dashboard_session and queues.dashboard_session_revoked, are in
-- their files under functions/.
