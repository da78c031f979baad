-- Whether a dashboard session was signed out (docs/dashboard.md, "Sessions").
create or replace function queues.dashboard_session_revoked(_session_id text)
returns boolean
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select exists (select from queues.dashboard_session_revoked r where r.session_id = _session_id)
$$;
revoke all on function queues.dashboard_session_revoked(text) from public;
comment on function queues.dashboard_session_revoked(text) is 'Whether a dashboard session was signed out (queues.revoke_dashboard_session).';
