// Package pgcluster starts and stops a private PostgreSQL cluster using the
// PostgreSQL binaries installed on the machine (initdb, pg_ctl, postgres).
//
// It is used by the test harness (internal/testing/dbtest) and by `taskorch dev`.
// The server only listens on 127.0.0.1 (plus, when the path is short enough,
// a Unix socket inside the data directory).
//
// # Running as root
//
// PostgreSQL refuses to run as root. When the calling process is root
// (os.Geteuid() == 0), Start hands the data directory to the "postgres" user
// (chown) and runs initdb and pg_ctl through `runuser -u postgres --`. The
// postgres user must be able to reach the data directory: Start never changes
// the permissions of parent directories, and returns an error if one of them
// is not searchable by postgres (e.g. a data dir under /root). Use a data
// directory under /tmp, /var/lib or similar in that case.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Config describes the cluster to start. Only DataDir is required.
type Config struct {
	// DataDir is the cluster's data directory. It is created and initialised
	// with initdb if it does not contain a PG_VERSION file yet; otherwise the
	// existing cluster (and its data) is reused. Relative paths are made
	// absolute. Start assumes exclusive ownership of DataDir.
	DataDir string

	// BinDir is the directory holding initdb, pg_ctl and postgres.
	// Default: found automatically with FindBinDir.
	BinDir string

	// Port is the TCP port to listen on, on 127.0.0.1 only.
	// Default (0): a free port is picked at every Start, so a reused DataDir
	// may get a different port each time; use Cluster.Port or Cluster.URL.
	Port int

	// Password is the password of the superuser "postgres". Default (empty):
	// no password, trust authentication (connections are only accepted on
	// 127.0.0.1 and the data dir's Unix socket). Otherwise scram-sha-256
	// authentication is configured. Authentication is configured by initdb
	// only, so for a reused DataDir, Password must be the one it was created
	// with.
	Password string

	// Settings are extra server settings passed as `-c name=value` on every
	// start, e.g. {"fsync": "off"}. Default: none. When Settings has
	// fsync=off, initdb also runs with --no-sync.
	Settings map[string]string

	// Ephemeral marks a throwaway cluster: Stop deletes DataDir, and Start
	// launches a small watchdog process that stops the server (immediate
	// mode) and deletes DataDir if the calling process exits without calling
	// Stop, e.g. after a panic, os.Exit, or SIGKILL. Default: false.
	Ephemeral bool

	// Logf, if set, receives progress messages (initdb, start, stop).
	// Default: messages are discarded.
	Logf func(format string, args ...any)
}

// Cluster is a running PostgreSQL cluster started by Start. Its methods are
// safe for concurrent use.
type Cluster struct {
	dataDir  string
	port     int
	password string
	r        *runner
	logf     func(format string, args ...any)
	watchdog *watchdog // nil unless Config.Ephemeral

	mu      sync.Mutex
	stopped bool
}

// Start initialises the cluster in cfg.DataDir if necessary (initdb with
// superuser "postgres", UTF8 encoding and the C locale) and starts the server
// with pg_ctl, waiting until it accepts connections.
//
// If a server is still running on cfg.DataDir (a postmaster.pid of a live
// postmaster, e.g. left behind when a previous process crashed), Start stops
// it (fast mode) and starts it again with the requested port and settings.
//
// If the server does not come up, the error includes the tail of the server
// log (DataDir/server.log).
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("pgcluster: Config.DataDir is required")
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("pgcluster: invalid port %d", cfg.Port)
	}
	for name := range cfg.Settings {
		if !validSettingName(name) {
			return nil, fmt.Errorf("pgcluster: invalid setting name %q", name)
		}
	}
	binDir := cfg.BinDir
	if binDir == "" {
		if binDir, err = FindBinDir(); err != nil {
			return nil, fmt.Errorf("pgcluster: %w", err)
		}
	} else if !hasServerBinaries(binDir) {
		return nil, fmt.Errorf("pgcluster: %s does not contain initdb, pg_ctl and postgres: %w", binDir, ErrNotInstalled)
	}
	r, err := newRunner(binDir)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c := &Cluster{
		dataDir:  dataDir,
		password: cfg.Password,
		r:        r,
		logf:     cfg.Logf,
	}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	if err := c.start(ctx, cfg); err != nil {
		c.abort(ctx)
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	return c, nil
}

// start does the work of Start.
func (c *Cluster) start(ctx context.Context, cfg Config) error {
	if err := c.r.prepareDataDir(ctx, c.dataDir); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := c.initdb(ctx, cfg); err != nil {
			return err
		}
	} else if err != nil {
		return err
	} else if err := c.stopLeftover(ctx); err != nil {
		return err
	}
	if cfg.Ephemeral {
		wd, err := startWatchdog(c.r, c.dataDir)
		if err != nil {
			return fmt.Errorf("start watchdog: %w", err)
		}
		c.watchdog = wd
	}
	// A picked port can be taken by someone else before the server binds
	// it; try a few times in that case.
	const attempts = 3
	for i := 1; ; i++ {
		port := cfg.Port
		if port == 0 {
			p, err := freePort()
			if err != nil {
				return err
			}
			port = p
		}
		err := c.pgCtlStart(ctx, port, cfg.Settings)
		if err == nil {
			c.port = port
			c.logf("pgcluster: server started on 127.0.0.1:%d (data dir %s)", port, c.dataDir)
			return nil
		}
		if cfg.Port != 0 || i == attempts || !errors.Is(err, errPortInUse) {
			return err
		}
		c.logf("pgcluster: port %d already in use, retrying with another one", port)
	}
}

// abort cleans up after a failed Start: a server that pg_ctl gave up waiting
// for may still come up, so it is stopped (immediate mode).
func (c *Cluster) abort(ctx context.Context) {
	if _, err := os.Stat(filepath.Join(c.dataDir, "postmaster.pid")); err == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = c.r.run(ctx, "pg_ctl", "stop", "-D", c.dataDir, "-m", "immediate", "-w")
	}
	if c.watchdog != nil {
		// Let the watchdog stop anything half started and, the cluster
		// being ephemeral, remove the data dir.
		c.watchdog.release(false)
	}
}

// URL returns a connection URL for database dbname as the superuser postgres:
// postgres://postgres[:password]@127.0.0.1:PORT/dbname?sslmode=disable.
func (c *Cluster) URL(dbname string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     "127.0.0.1:" + strconv.Itoa(c.port),
		Path:     "/" + dbname,
		RawQuery: "sslmode=disable",
	}
	if c.password != "" {
		u.User = url.UserPassword("postgres", c.password)
	}
	return u.String()
}

// Port returns the TCP port the server listens on (on 127.0.0.1).
func (c *Cluster) Port() int { return c.port }

// DataDir returns the absolute path of the cluster's data directory.
func (c *Cluster) DataDir() string { return c.dataDir }

// LogFile returns the path of the server log, DataDir/server.log. The log is
// appended to across starts.
func (c *Cluster) LogFile() string { return filepath.Join(c.dataDir, logFileName) }

// Stop stops the server with `pg_ctl stop -m fast -w`, waiting until the
// postmaster has exited. For an Ephemeral cluster it then deletes the data
// directory. Stop is idempotent: once it has succeeded, further calls return
// nil. Stopping a server that is no longer running is not an error.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	if _, err := c.r.run(ctx, "pg_ctl", "stop", "-D", c.dataDir, "-m", "fast", "-w", "-t", "60"); err != nil {
		if running, serr := c.running(ctx); serr != nil || running {
			return fmt.Errorf("pgcluster: stop server: %w", err)
		}
	}
	c.logf("pgcluster: server on port %d stopped", c.port)
	c.stopped = true
	if c.watchdog == nil {
		return nil
	}
	if err := os.RemoveAll(c.dataDir); err != nil {
		c.watchdog.release(false) // let it have another go
		return fmt.Errorf("pgcluster: remove data dir: %w", err)
	}
	c.watchdog.release(true)
	return nil
}

// TestSettings returns server settings for throwaway test clusters: they
// trade durability for speed (no fsync, asynchronous commit, no full page
// writes) and allow many connections, as parallel test packages share a
// cluster. Each call returns a new map.
func TestSettings() map[string]string {
	return map[string]string{
		"fsync":              "off",
		"synchronous_commit": "off",
		"full_page_writes":   "off",
		"max_connections":    "300",
	}
}
