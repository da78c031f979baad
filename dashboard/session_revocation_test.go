package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/dashboard"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// signInOver signs in on the dashboard at base with the token and returns the session cookie
// the client's jar got.
func signInOver(t *testing.T, c *http.Client, base string) *http.Cookie {
	t.Helper()
	_, body, _ := get(t, c, base+"/login")
	code, _ := post(t, c, base+"/login", url.Values{"csrf_token": {csrfFrom(t, body)}, "token": {testToken}, "next": {"/tasks"}})
	require.Equal(t, http.StatusSeeOther, code)
	u, err := url.Parse(base + "/")
	require.NoError(t, err)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "taskorch_session" {
			return ck
		}
	}
	require.FailNow(t, "no session cookie after signing in")
	return nil
}

// withCookie is a request header carrying one saved cookie, as a copy of it would be replayed.
func withCookie(ck *http.Cookie) []string { return []string{"Cookie", ck.Name + "=" + ck.Value} }

// Signing out revokes the session on the server: a saved copy of its cookie is refused
// afterwards, for pages and actions, by the dashboard that signed it out and by every other
// dashboard process sharing its secret key (one started after the sign-out included), while it
// worked on all of them before. Signing in again makes a new session that works.
func TestSignOutRevokesTheSession(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ctx := t.Context()
	var task int64
	require.NoError(t, pool.QueryRow(ctx, `select queues.enqueue('revoke.probe', '{}')`).Scan(&task))
	key := []byte("a shared secret key of 32 bytes!")
	replica := func() string {
		h, err := dashboard.New(pool, dashboard.Config{Token: testToken, SecretKey: key})
		require.NoError(t, err)
		return newServer(t, h).URL
	}
	a, b := replica(), replica()

	c := browserlessClient(t)
	saved := signInOver(t, c, a)
	anon := browserlessClient(t) // a client with no cookies of its own: only the saved copy
	for _, base := range []string{a, b} {
		code, body, _ := get(t, anon, base+"/tasks", withCookie(saved)...)
		require.Equal(t, http.StatusOK, code, "the session works on %s before signing out", base)
		require.Contains(t, body, "revoke.probe")
	}

	_, body, _ := get(t, c, a+"/tasks")
	code, loc := post(t, c, a+"/logout", url.Values{"csrf_token": {csrfFrom(t, body)}})
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/login", loc)
	require.Equal(t, 1, count(t, pool, `select count(*) from queues.dashboard_session_revoked`))

	later := replica() // started after the sign-out
	for _, base := range []string{a, b, later} {
		code, body, _ := get(t, anon, base+"/tasks", withCookie(saved)...)
		require.Equal(t, http.StatusUnauthorized, code, "%s refuses the saved cookie", base)
		require.Contains(t, body, `name="token"`, "the sign-in form")
		require.NotContains(t, body, "revoke.probe")
		code, _, _ = get(t, anon, base+"/tasks", append(withCookie(saved), "X-Taskorch-Fragment", "1")...)
		require.Equal(t, http.StatusUnauthorized, code, "a live refresh is refused too")

		// An action with the saved cookie and a valid CSRF pair is refused, and changes nothing.
		fresh := browserlessClient(t)
		_, login, _ := get(t, fresh, base+"/login")
		code, _ = post(t, fresh, base+"/tasks/"+itoa(task)+"/cancel", url.Values{"csrf_token": {csrfFrom(t, login)}},
			"Cookie", "taskorch_session="+saved.Value+"; taskorch_csrf="+csrfCookie(t, fresh, base))
		require.Equal(t, http.StatusUnauthorized, code)
		require.Equal(t, taskorch.StatusPending, taskStatus(t, pool, task))
	}

	// Signing in again makes a new session, which works everywhere.
	again := signInOver(t, browserlessClient(t), b)
	require.NotEqual(t, saved.Value, again.Value)
	for _, base := range []string{a, b, later} {
		code, _, _ := get(t, anon, base+"/tasks", withCookie(again)...)
		require.Equal(t, http.StatusOK, code, base)
	}
}

// csrfCookie is the CSRF cookie the client's jar holds for base.
func csrfCookie(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	u, err := url.Parse(base + "/")
	require.NoError(t, err)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "taskorch_csrf" {
			return ck.Value
		}
	}
	require.FailNow(t, "no CSRF cookie")
	return ""
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), sql, args...).Scan(&n), sql)
	return n
}

// The revocation functions refuse bad input with 22023 and write nothing; each sign-out
// deletes the rows of sessions that have expired since; PUBLIC and the worker's role may call
// neither function nor read the table.
func TestSessionRevocationFunctions(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ctx := t.Context()
	for _, tc := range []struct {
		id  any
		exp string
		arg string
	}{
		{nil, "now() + interval '1 hour'", "_session_id"},
		{"short", "now() + interval '1 hour'", "_session_id"},
		{"has spaces in it, 0123456789", "now() + interval '1 hour'", "_session_id"},
		{"abcdefghijklmnopqrstuv", "null", "_expires_at"},
		{"abcdefghijklmnopqrstuv", "'infinity'", "_expires_at"},
	} {
		_, err := pool.Exec(ctx, `select queues.revoke_dashboard_session($1, `+tc.exp+`)`, tc.id)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%v: %v", tc, err)
		require.Equal(t, "22023", pgErr.Code, "%v", tc)
		require.Contains(t, pgErr.Message, tc.arg)
	}
	require.Equal(t, 0, count(t, pool, `select count(*) from queues.dashboard_session_revoked`), "nothing written")

	// A session that expired is forgotten at the next sign-out; a live one stays.
	_, err := pool.Exec(ctx, `insert into queues.dashboard_session_revoked (session_id, expires_at) values
		('expired-session-0123456789', now() - interval '1 second'), ('live-session-0123456789ab', now() + interval '1 hour')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `select queues.revoke_dashboard_session('next-session-0123456789ab', now() + interval '1 hour')`)
	require.NoError(t, err)
	var ids []string
	rows, err := pool.Query(ctx, `select session_id from queues.dashboard_session_revoked order by session_id`)
	require.NoError(t, err)
	ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"live-session-0123456789ab", "next-session-0123456789ab"}, ids)
	var revoked bool
	require.NoError(t, pool.QueryRow(ctx, `select queues.dashboard_session_revoked('live-session-0123456789ab')`).Scan(&revoked))
	require.True(t, revoked)
	require.NoError(t, pool.QueryRow(ctx, `select queues.dashboard_session_revoked('never-revoked-0123456789')`).Scan(&revoked))
	require.False(t, revoked)

	for _, role := range []string{"public", "worker_service_user"} {
		for _, fn := range []string{"queues.revoke_dashboard_session(text, timestamptz)", "queues.dashboard_session_revoked(text)"} {
			var may bool
			require.NoError(t, pool.QueryRow(ctx, `select has_function_privilege($1, $2, 'execute')`, role, fn).Scan(&may))
			require.False(t, may, "%s may execute %s", role, fn)
		}
		var may bool
		require.NoError(t, pool.QueryRow(ctx, `select has_table_privilege($1, 'queues.dashboard_session_revoked', 'select,insert,update,delete')`, role).Scan(&may))
		require.False(t, may, role)
	}
}

// A dashboard whose role may not check sessions says so (503, naming the grant) instead of
// showing the page or looping back to the sign-in form; a bearer token needs no check.
func TestSessionCheckNeedsItsGrant(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ctx := context.Background()
	role := fmt.Sprintf("dash_nogrant_%d", time.Now().UnixNano())
	_, err := pool.Exec(ctx, fmt.Sprintf(`create role %s login; grant usage on schema queues to %s; grant select on all tables in schema queues to %[1]s`, role, role))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), fmt.Sprintf(`revoke all on all tables in schema queues from %s; revoke usage on schema queues from %[1]s; drop role if exists %[1]s`, role))
	})
	cfg := pool.Config().Copy()
	cfg.ConnConfig.User = role
	limited, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(limited.Close)
	h, err := dashboard.New(limited, dashboard.Config{Token: testToken})
	require.NoError(t, err)
	base := newServer(t, h).URL

	c := browserlessClient(t)
	signInOver(t, c, base)
	code, body, _ := get(t, c, base+"/tasks")
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Contains(t, body, "execute on queues.dashboard_session_revoked(text)")
	code, _, _ = get(t, browserlessClient(t), base+"/tasks", bearer()...)
	require.Equal(t, http.StatusOK, code, "the bearer token is checked without the database")
}
