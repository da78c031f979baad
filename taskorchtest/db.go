package taskorchtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch"
)

// A migrated database per test: NewDB and NewDBURL clone a template database that is migrated
// once per server and migration set (CREATE DATABASE ... TEMPLATE, a few milliseconds), and
// drop the clone when the test ends. The template, taskorchtest_tpl_<fingerprint>, is kept on
// the server for the next runs; it is named after the migrations' fingerprint
// (taskorch.MigrationFingerprint), so a taskorch with other migrations makes another one.

// DBOpts configures NewDB and NewDBURL. The zero value (or nil) gives the core schema.
type DBOpts struct {
	// Migrate is what the template database is migrated with (taskorch.Migrate's options: the
	// core schema, and the shipped processes it names). BeforeApply is not called.
	Migrate *taskorch.MigrateOpts
	// MaxConns bounds NewDB's pool (0: pgxpool's default).
	MaxConns int32
}

// NewDBURL creates a database of the test's own on the server of serverURL, migrated with
// taskorch's schema, and returns its URL (serverURL naming the new database). serverURL is a
// postgres:// URL whose user may create databases (CREATEDB) — and roles, the first time, when
// the template is migrated (the migrations create worker_service_user): the database it names
// is where the databases are created and dropped from ("postgres", typically). The database is
// dropped when the test ends, with every connection still open to it terminated. Setup
// failures end the test (Fatalf).
//
// It is safe for parallel tests, and for test binaries running at once on one server (the
// template is built under an advisory lock). A test binary killed before its cleanups leaves its
// databases (taskorchtest_<random>) behind.
func NewDBURL(tb testing.TB, serverURL string, opts *DBOpts) string {
	tb.Helper()
	if opts == nil {
		opts = &DBOpts{}
	}
	u, err := newDB(tb.Context(), serverURL, opts)
	if err != nil {
		tb.Fatalf("taskorchtest: %v", err)
		return ""
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(tb.Context()), time.Minute)
		defer cancel()
		if err := dropDB(ctx, serverURL, u.name); err != nil {
			tb.Errorf("taskorchtest: %v", err)
		}
	})
	return u.url
}

// NewDB is NewDBURL with a pool on the new database, closed when the test ends (before the
// database is dropped).
func NewDB(tb testing.TB, serverURL string, opts *DBOpts) *pgxpool.Pool {
	tb.Helper()
	u := NewDBURL(tb, serverURL, opts)
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		tb.Fatalf("taskorchtest: %v", err)
		return nil
	}
	if opts != nil && opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(tb.Context(), cfg)
	if err != nil {
		tb.Fatalf("taskorchtest: connect to the test's database: %v", err)
		return nil
	}
	tb.Cleanup(pool.Close) // registered after the drop: runs before it
	return pool
}

// Tx begins a transaction on db (a pool or a connection) and rolls it back when the test ends:
// for a test of code that enqueues in the application's transaction (EnqueueTx), with nothing
// committed. The test may commit or roll it back itself. A failure to begin ends the test.
func Tx(tb testing.TB, db interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}) pgx.Tx {
	tb.Helper()
	tx, err := db.Begin(tb.Context())
	if err != nil {
		tb.Fatalf("taskorchtest: begin the test's transaction: %v", err)
		return nil
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(tb.Context()), time.Minute)
		defer cancel()
		if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
			tb.Errorf("taskorchtest: roll back the test's transaction: %v", err)
		}
	})
	return tx
}

// A template, once built (or found) by this process, per server and fingerprint.
var (
	templatesMu sync.Mutex
	templates   = map[string]*template{}
)

type template struct {
	mu   sync.Mutex
	name string // set once built
}

type newDatabase struct{ name, url string }

// newDB clones the template of opts on serverURL's server into a new database.
func newDB(ctx context.Context, serverURL string, opts *DBOpts) (newDatabase, error) {
	if _, err := withDatabase(serverURL, "x"); err != nil {
		return newDatabase{}, err
	}
	fp, err := taskorch.MigrationFingerprint(opts.Migrate)
	if err != nil {
		return newDatabase{}, err
	}
	tpl, err := templateFor(ctx, serverURL, fp, opts.Migrate)
	if err != nil {
		return newDatabase{}, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "taskorchtest_" + hex.EncodeToString(b[:])
	conn, err := connect(ctx, serverURL)
	if err != nil {
		return newDatabase{}, err
	}
	defer closeConn(ctx, conn)
	if _, err := conn.Exec(ctx, "create database "+ident(name)+" template "+ident(tpl)); err != nil {
		return newDatabase{}, fmt.Errorf("create the test's database %s from %s: %w", name, tpl, err)
	}
	u, err := withDatabase(serverURL, name)
	if err != nil {
		return newDatabase{}, err
	}
	return newDatabase{name: name, url: u}, nil
}

// templateFor returns the name of the migrated template for fingerprint fp on serverURL's
// server, building it the first time.
func templateFor(ctx context.Context, serverURL, fp string, mo *taskorch.MigrateOpts) (string, error) {
	key, err := serverKey(serverURL)
	if err != nil {
		return "", err
	}
	templatesMu.Lock()
	t := templates[key+" "+fp]
	if t == nil {
		t = &template{}
		templates[key+" "+fp] = t
	}
	templatesMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.name != "" {
		return t.name, nil
	}
	name := "taskorchtest_tpl_" + fp[:min(16, len(fp))]
	if err := buildTemplate(ctx, serverURL, name, mo); err != nil {
		return "", err
	}
	t.name = name
	return name, nil
}

// templateDone marks a template whose migrations all committed.
const templateDone = "taskorchtest template: migrated"

// buildTemplate makes the template database name, migrated with mo, unless it exists complete
// already; under an advisory lock, so that test binaries running at once build it once. A
// template left incomplete (a binary killed while migrating it) is dropped and built again.
func buildTemplate(ctx context.Context, serverURL, name string, mo *taskorch.MigrateOpts) error {
	conn, err := connect(ctx, serverURL)
	if err != nil {
		return err
	}
	defer closeConn(ctx, conn)
	if _, err := conn.Exec(ctx, `select pg_advisory_lock(hashtext($1))`, name); err != nil {
		return fmt.Errorf("lock the template %s: %w", name, err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `select pg_advisory_unlock(hashtext($1))`, name) }()
	var exists bool
	var comment *string
	if err := conn.QueryRow(ctx, `select true, shobj_description(oid, 'pg_database') from pg_database where datname = $1`, name).
		Scan(&exists, &comment); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("look for the template %s: %w", name, err)
	}
	if exists && comment != nil && *comment == templateDone {
		return nil
	}
	if exists {
		if _, err := conn.Exec(ctx, "drop database "+ident(name)+" with (force)"); err != nil {
			return fmt.Errorf("drop the incomplete template %s: %w", name, err)
		}
	}
	if _, err := conn.Exec(ctx, "create database "+ident(name)); err != nil {
		return fmt.Errorf("create the template %s: %w", name, err)
	}
	u, err := withDatabase(serverURL, name)
	if err != nil {
		return err
	}
	if err := migrate(ctx, u, mo); err != nil {
		return fmt.Errorf("migrate the template %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "comment on database "+ident(name)+" is '"+templateDone+"'"); err != nil {
		return fmt.Errorf("mark the template %s migrated: %w", name, err)
	}
	return nil
}

// migrate applies taskorch's migrations (mo) to the database of u.
func migrate(ctx context.Context, u string, mo *taskorch.MigrateOpts) error {
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return err
	}
	defer pool.Close()
	var o *taskorch.MigrateOpts
	if mo != nil {
		o = &taskorch.MigrateOpts{Processes: mo.Processes}
	}
	_, err = taskorch.Migrate(ctx, pool, o)
	return err
}

// dropDB drops database name, terminating the connections still open to it.
func dropDB(ctx context.Context, serverURL, name string) error {
	conn, err := connect(ctx, serverURL)
	if err != nil {
		return err
	}
	defer closeConn(ctx, conn)
	if _, err := conn.Exec(ctx, "drop database if exists "+ident(name)+" with (force)"); err != nil {
		return fmt.Errorf("drop the test's database %s: %w", name, err)
	}
	return nil
}

func connect(ctx context.Context, serverURL string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return nil, fmt.Errorf("connect to the test server: %w", err)
	}
	return conn, nil
}

func closeConn(ctx context.Context, conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// withDatabase returns serverURL naming database name instead of its own.
func withDatabase(serverURL, name string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("the test server's URL must be a postgres:// URL, got %q", redact(serverURL))
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}

// serverKey identifies the server (and user) of serverURL.
func serverKey(serverURL string) (string, error) {
	cfg, err := pgx.ParseConfig(serverURL)
	if err != nil {
		return "", fmt.Errorf("the test server's URL %q: %w", redact(serverURL), err)
	}
	return fmt.Sprintf("%s:%d %s", cfg.Host, cfg.Port, cfg.User), nil
}

// redact hides a URL's password.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }
