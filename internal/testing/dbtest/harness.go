package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch/internal/pgcluster"
)

const (
	// setupTimeout bounds starting a cluster and building the template.
	setupTimeout = 3 * time.Minute

	// adminDB is the database used for administrative connections and
	// advisory locks (which are per database) on every server.
	adminDB = "postgres"

	// lockSpace is the first key of all advisory locks taken by dbtest.
	lockSpace int32 = 0x7a5c0db
	// templateLock is the second key of the lock serialising template builds.
	templateLock int32 = 0

	// Database name prefixes.
	templatePrefix = "taskorch_tpl_"
	dbPrefix       = "taskorch_t_"

	// sharedMaxConns is the pool size of the database shared through Tx.
	sharedMaxConns = 16
)

// harness is the state of one test binary's use of a server. Its fields
// other than mu, err, ready and the shared* and dbs ones are written once
// by setUp and read-only afterwards.
type harness struct {
	opts Options

	mu    sync.Mutex
	ready bool
	err   error // memoised setup failure

	tmpDir   string             // private cluster's data dir
	cluster  *pgcluster.Cluster // nil when using EnvDatabaseURL
	base     url.URL            // server URL without a database
	admin    *pgxpool.Pool      // connections to adminDB
	owner    *pgx.Conn          // holds the owner lock (lockSpace, key)
	key      uint32             // owner key, part of every database name
	template string
	strategy string // CREATE DATABASE clause choosing the clone strategy
	seq      atomic.Uint64

	dbsMu sync.Mutex
	dbs   map[string]bool // created and not yet dropped

	sharedMu  sync.Mutex
	shared    *pgxpool.Pool
	sharedErr error
}

// newHarness returns a harness that is not set up yet.
func newHarness(opts Options) *harness {
	return &harness{opts: opts, dbs: make(map[string]bool)}
}

// setUp connects to the server (starting a private cluster if needed) and
// makes sure the template exists; only the first call does the work.
func (h *harness) setUp(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ready || h.err != nil {
		return h.err
	}
	h.err = h.doSetUp(ctx)
	h.ready = h.err == nil
	return h.err
}

// doSetUp does the work of setUp.
func (h *harness) doSetUp(ctx context.Context) error {
	if raw := os.Getenv(EnvDatabaseURL); raw != "" {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
			return fmt.Errorf("%s must be a postgres://user:password@host:port/ URL, got %q", EnvDatabaseURL, raw)
		}
		h.base = *u
	} else if err := h.startCluster(ctx); err != nil {
		return err
	}
	h.base.Path, h.base.RawPath = "", ""

	cfg, err := pgxpool.ParseConfig(h.URL(adminDB))
	if err != nil {
		return fmt.Errorf("admin connection: %w", err)
	}
	cfg.MaxConns = 4
	if h.admin, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return fmt.Errorf("admin connection: %w", err)
	}
	if h.owner, err = pgx.Connect(ctx, h.URL(adminDB)); err != nil {
		return fmt.Errorf("connect to %s: %w", h.redactedURL(adminDB), err)
	}
	if err := h.takeOwnerKey(ctx); err != nil {
		return err
	}
	var version int
	if err := h.owner.QueryRow(ctx, "select current_setting('server_version_num')::int").Scan(&version); err != nil {
		return fmt.Errorf("server version: %w", err)
	}
	if version >= 150000 {
		// Median CREATE DATABASE time, 8 MB template (15 tables, 45
		// indexes), PostgreSQL 15 with TestSettings, on a shared 2-core
		// machine with other load (so noisy):
		//   lightly loaded, serial:      WAL_LOG 18-23 ms, FILE_COPY 12-19 ms
		//   loaded, serial, interleaved: WAL_LOG 76-120 ms, FILE_COPY 75-121 ms
		//   loaded, 2 concurrent:        WAL_LOG 157-182 ms, FILE_COPY 162-164 ms
		// No consistent winner. WAL_LOG is kept: its cost depends only
		// on the template's size, while FILE_COPY forces two cluster-wide
		// checkpoints per clone, whose cost grows with the data written
		// by the other tests sharing the server.
		h.strategy = " STRATEGY WAL_LOG"
	}
	if h.cluster == nil {
		h.dropStale(ctx)
	}
	h.template = templateName(h.opts.Fingerprint)
	return h.ensureTemplate(ctx)
}

// templateName returns the name of the template database for a migration
// set fingerprint.
func templateName(fingerprint string) string {
	sum := sha256.Sum256([]byte(fingerprint))
	return templatePrefix + hex.EncodeToString(sum[:6])
}

// startCluster starts a private, ephemeral cluster in a new temp dir.
func (h *harness) startCluster(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "taskorch-dbtest-")
	if err != nil {
		return fmt.Errorf("create cluster dir: %w", err)
	}
	h.tmpDir = dir
	h.cluster, err = pgcluster.Start(ctx, pgcluster.Config{
		DataDir:   dir,
		Settings:  pgcluster.TestSettings(),
		Ephemeral: true,
	})
	if err != nil {
		return fmt.Errorf("%s is not set, so a private PostgreSQL cluster is needed, but: %w", EnvDatabaseURL, err)
	}
	u, err := url.Parse(h.cluster.URL(""))
	if err != nil {
		return err
	}
	h.base = *u
	return nil
}

// takeOwnerKey picks a random key that no other test binary holds and takes
// the owner lock on it for the lifetime of the owner connection.
func (h *harness) takeOwnerKey(ctx context.Context) error {
	for range 10 {
		var b [4]byte
		_, _ = rand.Read(b[:])
		key := binary.BigEndian.Uint32(b[:])
		if key == uint32(templateLock) {
			continue
		}
		var ok bool
		if err := h.owner.QueryRow(ctx, "select pg_try_advisory_lock($1, $2)", lockSpace, lockKey(key)).Scan(&ok); err != nil {
			return fmt.Errorf("take owner lock: %w", err)
		}
		if ok {
			h.key = key
			return nil
		}
	}
	return errors.New("take owner lock: no free key found")
}

// dropStale drops test databases whose owner test binary is gone, i.e. whose
// owner lock is free. Failures are ignored: this is housekeeping.
func (h *harness) dropStale(ctx context.Context) {
	rows, err := h.owner.Query(ctx, `select datname from pg_database where starts_with(datname, $1)`, dbPrefix)
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	byOwner := make(map[uint32][]string)
	for _, name := range names {
		if key, ok := ownerOf(name); ok && key != h.key {
			byOwner[key] = append(byOwner[key], name)
		}
	}
	for key, names := range byOwner {
		var free bool
		err := h.owner.QueryRow(ctx, "select pg_try_advisory_lock($1, $2)", lockSpace, lockKey(key)).Scan(&free)
		if err != nil || !free {
			continue
		}
		for _, name := range names {
			_, _ = h.owner.Exec(ctx, "drop database if exists "+quote(name)+" with (force)")
		}
		_, _ = h.owner.Exec(ctx, "select pg_advisory_unlock($1, $2)", lockSpace, lockKey(key))
	}
}

// ownerOf extracts the owner key from a test database name.
func ownerOf(name string) (uint32, bool) {
	const keyLen = 8
	rest := name[len(dbPrefix):]
	if len(rest) < keyLen+2 || rest[keyLen] != '_' {
		return 0, false
	}
	key, err := strconv.ParseUint(rest[:keyLen], 16, 32)
	return uint32(key), err == nil
}

// ensureTemplate creates and migrates the template database unless a
// complete one exists. Builds are serialised across test binaries by an
// advisory lock; a template is complete once it carries the comment written
// as the last step, so a half-built template left by a crash is rebuilt.
func (h *harness) ensureTemplate(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, h.URL(adminDB))
	if err != nil {
		return fmt.Errorf("template: connect: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }() // also releases the lock
	if _, err := conn.Exec(ctx, "select pg_advisory_lock($1, $2)", lockSpace, templateLock); err != nil {
		return fmt.Errorf("template: lock: %w", err)
	}
	sum := sha256.Sum256([]byte(h.opts.Fingerprint))
	marker := "taskorch dbtest template, fingerprint sha256 " + hex.EncodeToString(sum[:])
	var isTemplate bool
	var comment *string
	err = conn.QueryRow(ctx, `select datistemplate, shobj_description(oid, 'pg_database')
		from pg_database where datname = $1`, h.template).Scan(&isTemplate, &comment)
	switch {
	case err == nil && comment != nil && *comment == marker:
		return nil // complete
	case err == nil: // incomplete: rebuild
		if isTemplate {
			if _, err := conn.Exec(ctx, "alter database "+quote(h.template)+" is_template false"); err != nil {
				return fmt.Errorf("template: unmark incomplete %s: %w", h.template, err)
			}
		}
		if _, err := conn.Exec(ctx, "drop database "+quote(h.template)+" with (force)"); err != nil {
			return fmt.Errorf("template: drop incomplete %s: %w", h.template, err)
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("template: look up %s: %w", h.template, err)
	}

	// The C locale makes sorting identical on every server.
	if _, err := conn.Exec(ctx, "create database "+quote(h.template)+
		" template template0 encoding 'UTF8' lc_collate 'C' lc_ctype 'C'"); err != nil {
		return fmt.Errorf("template: create %s: %w", h.template, err)
	}
	if err := h.migrate(ctx); err != nil {
		_, _ = conn.Exec(ctx, "drop database if exists "+quote(h.template)+" with (force)")
		return fmt.Errorf("template: migrate %s: %w", h.template, err)
	}
	for _, sql := range []string{
		"alter database " + quote(h.template) + " with is_template true allow_connections false",
		"comment on database " + quote(h.template) + " is " + quoteLiteral(marker),
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("template: finish %s: %w", h.template, err)
		}
	}
	return nil
}

// migrate runs Options.Migrate on the template database.
func (h *harness) migrate(ctx context.Context) error {
	if h.opts.Migrate == nil {
		return nil
	}
	conn, err := pgx.Connect(ctx, h.URL(h.template))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	return h.opts.Migrate(ctx, conn)
}

// teardown releases everything: it closes the pools, drops the databases
// still registered (unless the whole private cluster goes away) and stops the
// private cluster.
func (h *harness) teardown(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	h.sharedMu.Lock()
	if h.shared != nil {
		h.shared.Close()
	}
	h.sharedMu.Unlock()
	if h.cluster == nil && h.admin != nil {
		h.dbsMu.Lock()
		names := slices.Collect(maps.Keys(h.dbs))
		h.dbsMu.Unlock()
		for _, name := range names {
			if err := h.dropDB(ctx, name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if h.admin != nil {
		h.admin.Close()
	}
	if h.owner != nil {
		_ = h.owner.Close(ctx)
	}
	if h.cluster != nil {
		if err := h.cluster.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	} else if h.tmpDir != "" {
		_ = os.RemoveAll(h.tmpDir) // cluster failed to start
	}
	return errors.Join(errs...)
}

// URL returns the URL of database dbname on the server.
func (h *harness) URL(dbname string) string {
	u := h.base
	u.Path = "/" + dbname
	return u.String()
}

// redactedURL is URL without the password, for messages.
func (h *harness) redactedURL(dbname string) string {
	u := h.base
	u.Path = "/" + dbname
	return u.Redacted()
}

// quote quotes an SQL identifier.
func quote(name string) string { return pgx.Identifier{name}.Sanitize() }

// quoteLiteral quotes an SQL string literal.
func quoteLiteral(s string) string {
	b := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			b = append(b, '\'')
		}
		b = append(b, s[i])
	}
	return string(append(b, '\''))
}

// lockKey reinterprets a 32-bit key as the int4 pg_advisory_lock takes: bit for bit, any 32
// bits are a valid lock key.
func lockKey(key uint32) int32 { return int32(key) } //nolint:gosec // deliberate reinterpretation
