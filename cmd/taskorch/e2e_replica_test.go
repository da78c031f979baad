package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/pgcluster"
	"github.com/taskorch/taskorch/internal/testing/replicatest"
)

// replicatedURLs starts a primary and a streaming standby with a migrated database "app" and
// returns its URL on each.
func replicatedURLs(t *testing.T) (primary, replica string, pair *replicatest.Pair) {
	t.Helper()
	pair = replicatest.Start(t, replicatest.Options{
		Setup: func(ctx context.Context, p *pgcluster.Cluster) error {
			if err := pgExec(ctx, p.URL("postgres"), "create database app"); err != nil {
				return err
			}
			if r := run(t, "migrate", "up", "--database-url", p.URL("app")); r.code != exitOK {
				return fmt.Errorf("migrate: %s", r.err)
			}
			return nil
		},
	})
	return pair.Primary.URL("app"), pair.Standby.URL("app"), pair
}

// Listings read from the replica (and say how far behind it is), actions go to the primary.
func TestE2EReadReplicaListings(t *testing.T) {
	t.Parallel()
	primary, replica, pair := replicatedURLs(t)
	pool := openPool(t, primary)
	first := enqueue(t, pool, "replica.seen", `{}`, 0)
	pair.CaughtUp(t)

	db := []string{"--database-url", primary, "--read-database-url", replica}
	r := run(t, append([]string{"tasks", "list"}, db...)...)
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, "replica.seen")
	require.Regexp(t, `^taskorch: reading from postgres@127\.0\.0\.1:\d+/app: a replica, `, r.err)
	for _, cmd := range [][]string{{"tasks", "show", itoa(first)}, {"queues", "list"}, {"workers", "list"}, {"limits", "list"}, {"schedules", "list"}} {
		r := run(t, append(cmd, db...)...)
		require.Equal(t, exitOK, r.code, "%v: %s", cmd, r.err)
		require.Regexp(t, `a replica, (caught up with the primary|[0-9.]+ (B|kB) of WAL behind)`, r.err, cmd)
	}
	// A few bytes of the server's own background records may be in flight; caught up is what
	// it settles to.
	require.Eventually(t, func() bool {
		return strings.Contains(run(t, append([]string{"workers", "list"}, db...)...).err, "a replica, caught up with the primary")
	}, 10*time.Second, 50*time.Millisecond)

	// Replay paused: what the primary has and the replica has not is not listed, and the lag says so.
	standby := openPool(t, replica)
	_, err := standby.Exec(t.Context(), `select pg_wal_replay_pause()`)
	require.NoError(t, err)
	enqueue(t, pool, "replica.later", `{}`, 0)
	// The test server commits asynchronously: its WAL is flushed, and so measured, within
	// wal_writer_delay.
	behind := regexp.MustCompile(`a replica, [0-9.]+ (B|kB|MB) of WAL behind the primary`)
	require.Eventually(t, func() bool {
		r = run(t, append([]string{"tasks", "list"}, db...)...)
		return r.code == exitOK && behind.MatchString(r.err)
	}, 10*time.Second, 50*time.Millisecond, "the lag is said")
	require.NotContains(t, r.out, "replica.later")

	// An action with a read URL set still goes to the primary.
	r = run(t, append([]string{"tasks", "cancel", itoa(first)}, db...)...)
	require.Equal(t, exitOK, r.code, r.err)
	require.Equal(t, "cancelled", q[string](t, pool, `select status::text from queues.task where task_id = $1`, first))
	_, err = standby.Exec(t.Context(), `select pg_wal_replay_resume()`)
	require.NoError(t, err)

	// A read URL on a database that is not a standby is allowed, and said.
	r = run(t, "tasks", "list", "--database-url", primary, "--read-database-url", primary)
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.err, "the read database is not a standby")
	require.Contains(t, r.out, "replica.later")
}

// A worker whose URL lists only standbys, with target_session_attrs=read-write, writes nothing
// to them: it says why it cannot start yet and retries, and once the host is promoted, it runs.
func TestE2EWorkerOnStandbysOnly(t *testing.T) {
	t.Parallel()
	primary, replica, pair := replicatedURLs(t)
	pool := openPool(t, primary)
	id := enqueue(t, pool, "taskorch.noop", `{}`, 0)
	pair.CaughtUp(t)
	p := startWorkerProc(t, replica+"&target_session_attrs=read-write&connect_timeout=2", "TASKORCH_WORKER_ID=on-standby")
	require.Eventually(t, func() bool {
		return strings.Count(p.out.String(), "database not reachable yet; retrying") >= 2
	}, 30*time.Second, 50*time.Millisecond, "the worker says it is waiting for a writable server")
	require.Contains(t, p.out.String(), "no host of DATABASE_URL accepts writes yet", "the log says what is missing")
	t.Logf("the worker on standbys only says: %s", firstLine(p.out.String(), "retrying"))

	// The primary dies and the standby is promoted: the worker finds it writable and runs.
	require.NoError(t, pair.Primary.Crash())
	require.NoError(t, pair.Standby.Promote(t.Context()))
	promoted := openPool(t, replica)
	waitStatus(t, promoted, id, "completed")
	require.Equal(t, "on-standby", q[string](t, promoted, `select worker_id from queues.task_lease where task_id = $1`, id))
}

// firstLine is the first line of s that contains sub.
func firstLine(s, sub string) string {
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
