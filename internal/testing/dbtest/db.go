package dbtest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DBOptions configures a database returned by NewDBWith.
type DBOptions struct {
	// MaxConns is the pool's maximum number of connections.
	// Default (0): pgxpool's default, max(4, number of CPUs).
	MaxConns int32
}

// NewDB returns a pool connected to a new database of the test's own, cloned
// from the migrated template. The pool is closed and the database dropped
// when the test ends. Setup failures end the test with t.Fatal.
func NewDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return NewDBWith(t, DBOptions{})
}

// NewDBWith is NewDB with options.
func NewDBWith(t testing.TB, opts DBOptions) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(NewDBURL(t))
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatalf("dbtest: connect to test database: %v", err)
	}
	t.Cleanup(pool.Close) // runs before the database is dropped
	return pool
}

// NewDBURL creates a new database like NewDB and returns its URL (including
// credentials), for tests that connect from separate processes such as the
// CLI binary. The database is dropped when the test ends, terminating any
// connection still open to it.
func NewDBURL(t testing.TB) string {
	t.Helper()
	return newDB(t, "")
}

// NewEmptyDBURL creates a new database with nothing in it (cloned from
// template0, not from the migrated template), for tests of the migrations
// themselves, and returns its URL. It is dropped when the test ends.
func NewEmptyDBURL(t testing.TB) string {
	t.Helper()
	return newDB(t, "template0")
}

// newDB creates a database cloned from template (the migrated template when
// empty), dropped when the test ends, and returns its URL.
func newDB(t testing.TB, template string) string {
	t.Helper()
	h := setUp(t)
	name := fmt.Sprintf("%s%08x_%d", dbPrefix, h.key, h.seq.Add(1))
	if err := h.createDB(t.Context(), name, template); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := cleanupContext(t)
		defer cancel()
		if err := h.dropDB(ctx, name); err != nil {
			t.Errorf("dbtest: %v", err)
		}
	})
	return h.URL(name)
}

// Tx returns a transaction on a migrated database shared by all tests of the
// package; it is rolled back when the test ends. This is the fastest way to
// get a database for a test that does not need to commit. Concurrent tests'
// transactions can still block each other, e.g. when inserting the same
// unique key.
func Tx(t testing.TB) pgx.Tx {
	t.Helper()
	pool, err := setUp(t).sharedPool(t.Context())
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatalf("dbtest: begin transaction: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := cleanupContext(t)
		defer cancel()
		if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
			t.Errorf("dbtest: roll back: %v", err)
		}
	})
	return tx
}

// AdminURL returns the URL of the server's "postgres" database, as the user
// the harness connects as, for tests that need to administer the server.
func AdminURL(t testing.TB) string {
	t.Helper()
	return ServerURL(t, adminDB)
}

// ServerURL returns the URL of database dbname on the harness's server
// (including credentials). It does not create the database.
func ServerURL(t testing.TB, dbname string) string {
	t.Helper()
	return setUp(t).URL(dbname)
}

// sharedPool returns the pool of the package's shared database, creating
// the database on first use.
func (h *harness) sharedPool(ctx context.Context) (*pgxpool.Pool, error) {
	h.sharedMu.Lock()
	defer h.sharedMu.Unlock()
	if h.shared != nil || h.sharedErr != nil {
		return h.shared, h.sharedErr
	}
	h.shared, h.sharedErr = h.newSharedPool(ctx)
	return h.shared, h.sharedErr
}

// newSharedPool creates the shared database and a pool for it.
func (h *harness) newSharedPool(ctx context.Context) (*pgxpool.Pool, error) {
	name := fmt.Sprintf("%s%08x_shared", dbPrefix, h.key)
	if err := h.createDB(ctx, name, ""); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(h.URL(name))
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = sharedMaxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to shared database: %w", err)
	}
	return pool, nil
}

// createDB clones template (the migrated template when empty) into a new
// database called name and registers it for dropping at teardown.
func (h *harness) createDB(ctx context.Context, name, template string) error {
	if template == "" {
		template = h.template
	}
	h.dbsMu.Lock()
	h.dbs[name] = true
	h.dbsMu.Unlock()
	sql := "create database " + quote(name) + " template " + quote(template) + h.strategy
	if _, err := h.admin.Exec(ctx, sql); err != nil {
		return fmt.Errorf("create test database %s from %s: %w", name, template, err)
	}
	return nil
}

// dropDB drops the database name, terminating connections still open to it.
func (h *harness) dropDB(ctx context.Context, name string) error {
	if _, err := h.admin.Exec(ctx, "drop database if exists "+quote(name)+" with (force)"); err != nil {
		return fmt.Errorf("drop test database %s: %w", name, err)
	}
	h.dbsMu.Lock()
	delete(h.dbs, name)
	h.dbsMu.Unlock()
	return nil
}
