// Package dbtest is the PostgreSQL test harness used by every package's tests.
//
// A package opts in from its TestMain:
//
//	func TestMain(m *testing.M) {
//		dbtest.Main(m, dbtest.Options{Migrate: migrate, Fingerprint: checksum})
//	}
//
// and its tests then call NewDB (a fresh, migrated database of their own),
// NewDBURL (the same, as a URL for a child process) or Tx (a transaction on a
// database shared by the package, rolled back at the end of the test).
//
// # Server
//
// If the environment variable TASKORCH_TEST_DATABASE_URL is set, it must be a
// postgres:// URL of an existing server on which its user may create
// databases (superuser or CREATEDB); only the server address and credentials
// are used, administrative work happens in its "postgres" database. Use
// `go run ./internal/cmd/withpg -- go test ./...` to start one private
// server for a whole test run. Otherwise each test binary starts its own
// private throwaway cluster (internal/pgcluster) in a temporary directory,
// with pgcluster.TestSettings, when a test first needs a database, and stops
// and deletes it when the tests are done (a watchdog process also does so if
// the test binary crashes).
//
// # Databases
//
// The migrations are applied once per server and migration set to a template
// database taskorch_tpl_<hash of Options.Fingerprint>; test databases,
// taskorch_t_<owner>_<n>, are cloned from it with CREATE DATABASE ...
// TEMPLATE, which takes a few milliseconds. Each test binary holds an
// advisory lock identifying it as <owner> while it runs, so that databases
// left behind by a crashed test binary can be recognised and are dropped by
// the next test binary using the same server.
package dbtest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDatabaseURL names the environment variable holding the URL of an
// existing PostgreSQL server to run the tests against. If it is empty, each
// test binary starts a private cluster.
const EnvDatabaseURL = "TASKORCH_TEST_DATABASE_URL"

// Options configures the harness for one test package.
type Options struct {
	// Migrate applies the schema to a new, empty database through conn. It
	// is called once per server and Fingerprint, to build the template the
	// test databases are cloned from. Nil means that test databases are
	// empty.
	Migrate func(ctx context.Context, conn *pgx.Conn) error

	// Fingerprint identifies the migration set, e.g. a checksum of all
	// migrations; a template is reused by all test binaries and runs with
	// the same Fingerprint, so it must change whenever the schema changes.
	// Required when Migrate is set.
	Fingerprint string
}

// current is the harness of this test binary, set by Main.
var current *harness

// Main runs the tests of a package that uses this harness; call it from the
// package's TestMain. It runs m.Run, then drops the databases it created
// (the templates are kept for later runs) and stops the private cluster if
// it started one, and exits the process with the tests' exit code. Invalid
// options or a failed teardown make it print the problem and exit with a
// non-zero code. The server is only set up when a test first asks for a
// database, so test binaries that need none (e.g. `go test -run NONE`) pay
// nothing.
func Main(m *testing.M, opts Options) {
	os.Exit(run(m, opts))
}

// run does the work of Main and returns the exit code.
func run(m *testing.M, opts Options) int {
	if opts.Migrate != nil && opts.Fingerprint == "" {
		fmt.Fprintln(os.Stderr, "dbtest: Options.Fingerprint is required when Options.Migrate is set")
		return 1
	}
	current = newHarness(opts)
	code := m.Run()
	runExampleCleanups()
	// Main is the root of the test binary, so this is the root context.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := current.teardown(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: teardown: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// setUp returns the harness, set up, or ends the test with t.Fatal.
func setUp(t testing.TB) *harness {
	t.Helper()
	h := current
	if h == nil {
		t.Fatal("dbtest: the test package must call dbtest.Main from its TestMain: " +
			"func TestMain(m *testing.M) { dbtest.Main(m, dbtest.Options{...}) }")
	}
	ctx, cancel := context.WithTimeout(t.Context(), setupTimeout)
	defer cancel()
	if err := h.setUp(ctx); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return h
}

// cleanupContext returns a context for t.Cleanup functions, which run after
// t.Context() has been cancelled.
func cleanupContext(t testing.TB) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
}
