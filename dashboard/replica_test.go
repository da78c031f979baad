package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/dashboard"
	"github.com/taskorch/taskorch/internal/pgcluster"
	"github.com/taskorch/taskorch/internal/testing/replicatest"
)

// replicatedDB starts a primary and a streaming standby with a migrated database "app" and
// returns pools on it: one on the primary, one on the standby.
func replicatedDB(t *testing.T) (primary, replica *pgxpool.Pool, pair *replicatest.Pair) {
	t.Helper()
	pair = replicatest.Start(t, replicatest.Options{
		Setup: func(ctx context.Context, p *pgcluster.Cluster) error {
			conn, err := pgx.Connect(ctx, p.URL("postgres"))
			if err != nil {
				return err
			}
			defer func() { _ = conn.Close(ctx) }()
			if _, err := conn.Exec(ctx, "create database app"); err != nil {
				return err
			}
			pool, err := pgxpool.New(ctx, p.URL("app"))
			if err != nil {
				return err
			}
			defer pool.Close()
			_, err = taskorch.Migrate(ctx, pool, &taskorch.MigrateOpts{Processes: []string{"comms"}})
			return err
		},
	})
	open := func(u string) *pgxpool.Pool {
		pool, err := pgxpool.New(t.Context(), u)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		return pool
	}
	return open(pair.Primary.URL("app")), open(pair.Standby.URL("app")), pair
}

// Pages read from the replica, actions go to the primary, and every page says how far behind
// the replica is: caught up, or behind while its replay is paused.
func TestReplicaReadsActionsOnPrimary(t *testing.T) {
	t.Parallel()
	primary, replica, pair := replicatedDB(t)
	s := seed(t, primary)
	pair.CaughtUp(t)
	h, err := dashboard.New(primary, dashboard.Config{Token: testToken, ReadPool: replica})
	require.NoError(t, err)
	srv := newServer(t, h)
	c := browserlessClient(t)

	for _, page := range []string{"/", "/tasks", "/tasks/" + itoa(s.dead), "/dead", "/queues", "/processes", "/limits", "/workers", "/schedules", "/outbox"} {
		code, body, _ := get(t, c, srv.URL+page, bearer()...)
		require.Equal(t, http.StatusOK, code, page)
		require.Regexp(t, `<p id="replica-lag" class="replica[^"]*" role="status">Reading from a replica: (caught up with the primary|[0-9.]+ (B|kB) of WAL behind)`, body, page)
	}
	// The server's own background records (a checkpoint, a snapshot of running transactions)
	// may put the replica a few bytes behind for a moment; caught up is what it settles to.
	require.Eventually(t, func() bool {
		_, body, _ := get(t, c, srv.URL+"/", bearer()...)
		return strings.Contains(body, "Reading from a replica: caught up with the primary.")
	}, 10*time.Second, 50*time.Millisecond)
	// A live refresh carries the lag too.
	_, frag, _ := get(t, c, srv.URL+"/tasks", append(bearer(), "X-Taskorch-Fragment", "1")...)
	require.Contains(t, frag, `id="replica-lag"`)

	// An action goes to the primary (the replica refuses writes).
	_, body, _ := get(t, c, srv.URL+"/tasks/"+itoa(s.dead), bearer()...)
	code, _ := post(t, c, srv.URL+"/tasks/"+itoa(s.dead)+"/retry", url.Values{"csrf_token": {csrfFrom(t, body)}}, bearer()...)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, taskorch.StatusPending, taskStatus(t, primary, s.dead))

	// Replay paused on the standby, work on the primary: the pages say it is behind.
	_, err = replica.Exec(t.Context(), `select pg_wal_replay_pause()`)
	require.NoError(t, err)
	client, err := taskorch.NewClient(primary, nil)
	require.NoError(t, err)
	for range 50 {
		_, err := client.Enqueue(t.Context(), taskorch.RawArgs{Type: "lag.probe", Payload: []byte(`{"pad": "0123456789012345678901234567890123456789"}`)}, nil)
		require.NoError(t, err)
	}
	// The test server commits asynchronously: its WAL is flushed, and so measured, within
	// wal_writer_delay.
	behind := regexp.MustCompile(`Reading from a replica: [0-9.]+ (B|kB|MB) of WAL behind the primary`)
	require.Eventually(t, func() bool {
		_, body, _ = get(t, c, srv.URL+"/", bearer()...)
		return behind.MatchString(body)
	}, 10*time.Second, 50*time.Millisecond)
	_, body, _ = get(t, c, srv.URL+"/tasks?type=lag.probe", bearer()...)
	require.Contains(t, body, "No tasks match.", "the replica does not have them yet")
	_, err = replica.Exec(t.Context(), `select pg_wal_replay_resume()`)
	require.NoError(t, err)
	pair.CaughtUp(t)
	_, body, _ = get(t, c, srv.URL+"/tasks?type=lag.probe", bearer()...)
	require.Contains(t, body, "lag.probe")
}

// A read pool on a database that is not a standby is allowed, and the pages say so.
func TestReplicaReadPoolOnPrimary(t *testing.T) {
	t.Parallel()
	_, srvPool, _ := newDashboard(t, dashboard.Config{})
	h, err := dashboard.New(srvPool, dashboard.Config{Token: testToken, ReadPool: srvPool})
	require.NoError(t, err)
	srv := newServer(t, h)
	code, body, _ := get(t, browserlessClient(t), srv.URL+"/", bearer()...)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "which is not a standby")
}
