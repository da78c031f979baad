package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch"
)

// Options says where a benchmark runs and what it reports on the way.
type Options struct {
	// DatabaseURL is the database the benchmark is given. Required.
	DatabaseURL string

	// InPlace works in the given database instead of creating one of its own (the default when
	// the user may not create databases). Open refuses then if tasks are pending or running
	// there: the benchmark's workers would run them.
	InPlace bool

	// Keep leaves the created database (or, in place, the rows) behind at Close, for a look
	// afterwards (EXPLAIN, pg_stat_statements).
	Keep bool

	// Processes are the process sets to migrate besides the core ("comms" for Processes).
	Processes []string

	// Progress receives progress lines (a terminal); nil keeps quiet.
	Progress io.Writer

	// Log receives the workers' warnings and errors; nil discards them.
	Log io.Writer

	// PollOnly runs the workers without LISTEN (WorkerConfig.PollOnly), for a DatabaseURL
	// through a transaction-pooling proxy; statements are then sent unnamed.
	PollOnly bool

	// ListenURL, when set, is a direct URL of the same server: the workers LISTEN on it, in the
	// benchmark's database (WorkerConfig.ListenConfig), while their work goes through
	// DatabaseURL, a transaction pooler; statements are then sent unnamed.
	ListenURL string
}

// Info describes where a benchmark ran: the database, the server's durability settings, and
// the machine.
type Info struct {
	Database string `json:"database"`
	// Listen is where the workers LISTEN: "pool" (a connection of their pool), "direct"
	// (Options.ListenURL) or "none" (Options.PollOnly).
	Listen            string `json:"listen"`
	DatabaseCreated   bool   `json:"database_created"`
	Kept              bool   `json:"kept,omitempty"` // left behind for a look (Options.Keep)
	ServerVersion     string `json:"server_version"`
	Fsync             string `json:"fsync"`
	SynchronousCommit string `json:"synchronous_commit"`
	FullPageWrites    string `json:"full_page_writes"`
	SharedBuffers     string `json:"shared_buffers"`
}

// Env is a prepared database to run benchmarks in. Close cleans up.
type Env struct {
	// URL is the benchmark database's URL, credentials included, for child processes.
	URL  string
	Info Info

	admin   *pgxpool.Pool // a few connections on the benchmark database
	cfg     *pgxpool.Config
	server  *pgxpool.Pool // on the given database, to drop the created one; nil in place
	created string        // the created database's name
	keep    bool
	marks   *watermarks // in place: what existed before
	// postmaster is the local server's postmaster pid, for its CPU time; 0 when not visible.
	postmaster int
	progress   *progress
	log        *slog.Logger
	opts       Options // as opened, for sibling
	// listen is the workers' direct LISTEN connection (Options.ListenURL), or nil.
	listen *pgx.ConnConfig
}

// Open prepares a database for benchmarks: a new database on the same server
// (taskorch_bench_<random>) when the user may create one and opts.InPlace is not set, else the
// given database. Either way it applies the migrations.
func Open(ctx context.Context, opts Options) (*Env, error) {
	if opts.DatabaseURL == "" {
		return nil, errors.New("bench: no database URL")
	}
	given, err := pgxpool.ParseConfig(opts.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("bench: the database URL: %w", err)
	}
	e := &Env{keep: opts.Keep, progress: newProgress(opts.Progress), log: newLogger(opts.Log), opts: opts}
	given.MaxConns = 2
	unnamedIfPooled(given, opts)
	server, err := pgxpool.NewWithConfig(ctx, given)
	if err != nil {
		return nil, fmt.Errorf("bench: connect: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			e.closeQuietly(ctx)
			server.Close()
		}
	}()

	var mayCreate bool
	if err := server.QueryRow(ctx, `select rolsuper or rolcreatedb from pg_roles where rolname = current_user`).Scan(&mayCreate); err != nil {
		return nil, fmt.Errorf("bench: connect: %w", err)
	}
	e.URL = opts.DatabaseURL
	if mayCreate && !opts.InPlace {
		name := "taskorch_bench_" + randomHex(4)
		e.progress.phase("creating database %s", name)
		if _, err := server.Exec(ctx, "create database "+pgx.Identifier{name}.Sanitize()); err != nil {
			return nil, fmt.Errorf("bench: create database %s: %w", name, err)
		}
		e.created, e.server = name, server
		e.URL, err = withDatabase(opts.DatabaseURL, name)
		if err != nil {
			return nil, err
		}
	} else {
		server.Close()
		if !opts.InPlace {
			e.log.Warn("this user may not create databases: benchmarking in the given database, deleting its rows afterwards")
		}
	}
	e.Info.Database, e.Info.DatabaseCreated, e.Info.Kept = e.created, e.created != "", opts.Keep

	e.cfg, err = pgxpool.ParseConfig(e.URL)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if e.Info.Database == "" {
		e.Info.Database = e.cfg.ConnConfig.Database
	}
	switch {
	case opts.PollOnly:
		e.Info.Listen = "none"
	case opts.ListenURL != "":
		e.Info.Listen = "direct"
	default:
		e.Info.Listen = "pool"
	}
	unnamedIfPooled(e.cfg, opts)
	if opts.ListenURL != "" {
		u := opts.ListenURL
		if e.created != "" {
			if u, err = withDatabase(u, e.created); err != nil {
				return nil, err
			}
		}
		if e.listen, err = pgx.ParseConfig(u); err != nil {
			return nil, fmt.Errorf("bench: the LISTEN URL: %w", err)
		}
	}
	e.admin, err = e.NewPool(ctx, 4, nil)
	if err != nil {
		return nil, err
	}
	e.progress.phase("migrating")
	if _, err := taskorch.Migrate(ctx, e.admin, &taskorch.MigrateOpts{Processes: opts.Processes}); err != nil {
		return nil, fmt.Errorf("bench: migrate: %w", err)
	}
	if e.created == "" {
		if e.marks, err = takeWatermarks(ctx, e.admin); err != nil {
			return nil, err
		}
	}
	if err := e.admin.QueryRow(ctx, `select current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit'), current_setting('full_page_writes'), current_setting('shared_buffers')`).
		Scan(&e.Info.ServerVersion, &e.Info.Fsync, &e.Info.SynchronousCommit, &e.Info.FullPageWrites, &e.Info.SharedBuffers); err != nil {
		return nil, fmt.Errorf("bench: read settings: %w", err)
	}
	e.postmaster = e.findPostmaster(ctx)
	e.progress.clear()
	ok = true
	return e, nil
}

// NewPool returns a pool of up to maxConns connections on the benchmark database, with tracer
// (may be nil) on its connections.
func (e *Env) NewPool(ctx context.Context, maxConns int32, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	cfg := e.cfg.Copy()
	cfg.MaxConns = maxConns
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: connect: %w", err)
	}
	return pool, nil
}

// Close removes what the benchmark made: it drops the created database, or, in place, deletes
// the rows the benchmark added (unless Options.Keep). It runs even when ctx is done. A second
// call does nothing.
func (e *Env) Close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	e.progress.clear()
	var err error
	if e.marks != nil && !e.keep && e.admin != nil {
		e.progress.phase("deleting the benchmark's rows")
		err = e.marks.cleanUp(ctx, e.admin)
	}
	e.marks = nil
	if e.admin != nil {
		e.admin.Close()
		e.admin = nil
	}
	if e.server != nil {
		if e.created != "" && !e.keep {
			e.progress.phase("dropping database %s", e.created)
			if _, derr := e.server.Exec(ctx, "drop database if exists "+pgx.Identifier{e.created}.Sanitize()+" with (force)"); derr != nil {
				err = errors.Join(err, fmt.Errorf("bench: drop database %s: %w", e.created, derr))
			}
		}
		e.server.Close()
		e.server = nil
	}
	e.progress.clear()
	return err
}

func (e *Env) closeQuietly(ctx context.Context) {
	if e.admin != nil {
		e.admin.Close()
		e.admin = nil
	}
	if e.server != nil && e.created != "" {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_, _ = e.server.Exec(dctx, "drop database if exists "+pgx.Identifier{e.created}.Sanitize()+" with (force)")
	}
}

// sibling opens a second benchmark database on the same server, for measurements that compare
// two databases side by side; nil when this environment works in place.
func (e *Env) sibling(ctx context.Context) (*Env, error) {
	if !e.Info.DatabaseCreated {
		return nil, nil
	}
	o := e.opts
	o.Progress = nil
	s, err := Open(ctx, o)
	if err != nil {
		return nil, err
	}
	s.progress = e.progress
	return s, nil
}

// Admin returns a small pool on the benchmark database.
func (e *Env) Admin() *pgxpool.Pool { return e.admin }

// checkpoint asks for a checkpoint, so that runs start from the same state; a user without the
// privilege (pg_checkpoint, superuser) goes without.
func (e *Env) checkpoint(ctx context.Context) {
	if _, err := e.admin.Exec(ctx, "checkpoint"); err != nil && ctx.Err() == nil {
		e.log.Debug("no checkpoint before the run", "error", err)
	}
}

// withDatabase returns the URL (or key=value connection string) u pointing at database name.
// unnamedIfPooled makes cfg send statements unnamed when opts says DatabaseURL goes through a
// transaction pooler (named prepared statements fail there), unless the URL chose a mode.
func unnamedIfPooled(cfg *pgxpool.Config, opts Options) {
	if (opts.PollOnly || opts.ListenURL != "") && !strings.Contains(opts.DatabaseURL, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
}

func withDatabase(u, name string) (string, error) {
	if strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://") {
		p, err := url.Parse(u)
		if err != nil {
			return "", fmt.Errorf("bench: the database URL: %w", err)
		}
		p.Path = "/" + name
		p.RawPath = ""
		return p.String(), nil
	}
	return u + " dbname=" + name, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newLogger(w io.Writer) *slog.Logger {
	if w == nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
