// Package replicatest starts, for a test, a private PostgreSQL primary and a streaming standby
// of it (pg_basebackup -R), on 127.0.0.1 at free ports, removed when the test ends. The tests
// of reads on a replica and of failover use it (docs/operations.md, "Production topology").
package replicatest

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch/internal/pgcluster"
)

// Options configures a pair.
type Options struct {
	// Settings are both servers' settings, on top of pgcluster.TestSettings.
	Settings map[string]string
	// StandbyConninfo, when set, gives the standby's primary_conninfo from the primary's port
	// (e.g. through a proxy). Defaults to the primary's address as pg_basebackup -R writes it.
	StandbyConninfo func(primaryPort int) string
	// Setup runs on the primary, in database "postgres", before the standby is made: what it
	// creates (a database, a schema) is on the standby from the start.
	Setup func(ctx context.Context, primary *pgcluster.Cluster) error
}

// Pair is a primary and its standby.
type Pair struct {
	Primary, Standby *pgcluster.Cluster
}

// Start starts the pair and waits until the standby streams, or fails t.
func Start(t testing.TB, opts Options) *Pair {
	t.Helper()
	ctx := context.WithoutCancel(t.Context()) // the servers outlive the test's context, until its cleanup
	settings := pgcluster.TestSettings()
	maps.Copy(settings, opts.Settings)
	primary, err := pgcluster.Start(ctx, pgcluster.Config{DataDir: dataDir(t, "primary"), Port: freePort(t), Settings: settings})
	if err != nil {
		t.Fatalf("replicatest: primary: %v", err)
	}
	t.Cleanup(func() { _ = primary.Stop(ctx) })
	if opts.Setup != nil {
		if err := opts.Setup(ctx, primary); err != nil {
			t.Fatalf("replicatest: setup: %v", err)
		}
	}
	sdir := dataDir(t, "standby")
	if err := primary.Basebackup(ctx, sdir); err != nil {
		t.Fatalf("replicatest: %v", err)
	}
	ssettings := maps.Clone(settings)
	if opts.StandbyConninfo != nil {
		ssettings["primary_conninfo"] = opts.StandbyConninfo(primary.Port())
	}
	standby, err := pgcluster.Start(ctx, pgcluster.Config{DataDir: sdir, Port: freePort(t), Settings: ssettings})
	if err != nil {
		t.Fatalf("replicatest: standby: %v", err)
	}
	t.Cleanup(func() { _ = standby.Stop(ctx) })
	p := &Pair{Primary: primary, Standby: standby}
	p.waitStreaming(t)
	return p
}

// waitStreaming waits until the primary sees the standby streaming.
func (p *Pair) waitStreaming(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var n int
		err := query(t.Context(), p.Primary.URL("postgres"), `select count(*)::int from pg_stat_replication where state = 'streaming'`, &n)
		if err == nil && n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicatest: the standby is not streaming after 60s (last error: %v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CaughtUp waits until the standby has replayed everything the primary had written when it was
// called, or fails t.
func (p *Pair) CaughtUp(t testing.TB) {
	t.Helper()
	// A transaction with an id, committed synchronously, flushes the WAL up to its commit
	// record: everything committed before it (asynchronously too) is then flushed, and the
	// flush position is what a standby can replay up to.
	lsn, err := flushedLSN(t.Context(), p.Primary.URL("postgres"))
	if err != nil {
		t.Fatalf("replicatest: %v", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var done bool
		err := query(t.Context(), p.Standby.URL("postgres"), `select pg_last_wal_replay_lsn() >= $1::pg_lsn`, &done, lsn)
		if err == nil && done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicatest: the standby has not replayed up to %s after 60s (last error: %v)", lsn, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// flushedLSN commits a transaction with an id synchronously and returns a WAL position before
// its commit record, so flushed with it.
func flushedLSN(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "set synchronous_commit = on"); err != nil {
		return "", err
	}
	var lsn string
	err = conn.QueryRow(ctx, `with x as (select pg_current_xact_id()) select pg_current_wal_insert_lsn()::text from x`).Scan(&lsn)
	return lsn, err
}

// query runs sql on a connection of its own and scans its one row into dst.
func query(ctx context.Context, url, sql string, dst any, args ...any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	return conn.QueryRow(ctx, sql, args...).Scan(dst)
}

// dataDir is a data directory under the test's temp dir; as root PostgreSQL runs as the
// postgres user, so the directories above it are made enterable.
func dataDir(t testing.TB, name string) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != filepath.Clean(os.TempDir()) && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil { //nolint:gosec // test directories without secrets
			t.Fatalf("replicatest: %v", err)
		}
	}
	return filepath.Join(dir, name)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("replicatest: %v", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// String names the pair's addresses, for logs.
func (p *Pair) String() string {
	return fmt.Sprintf("primary 127.0.0.1:%d, standby 127.0.0.1:%d", p.Primary.Port(), p.Standby.Port())
}
