package chaos

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/cmd/taskorch/internal/chaosflow"
	"github.com/taskorch/taskorch/internal/pgcluster"
)

//go:embed fixture.sql
var fixtureSQL string

// env is a run in progress: everything the faults act on.
type env struct {
	cfg   Config
	log   *slog.Logger
	rng   *lockedRand
	dir   string
	pgCfg pgcluster.Config

	pgMu    sync.Mutex
	cluster *pgcluster.Cluster

	proxy      *toxiproxy
	pgProxyURL string // PostgreSQL through toxiproxy: the workers on the host
	redis      *redisServer
	netns      []*netns
	fleet      *fleet
	pool       *pgxpool.Pool // straight to PostgreSQL, for the producer and the checker
	prod       *producer
	phases     []PhaseReport

	mu     sync.Mutex
	cuts   int
	kills  []kill // the worker kills, in order, for the stranded-time report
	faults map[string]int
	failed error // the first harness error; ends the run
}

// Run runs the harness described by cfg and returns its report. The error is for the harness
// itself failing (a server that cannot start); a run that found problems returns a report whose
// Passed is false.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	begin := time.Now()
	e := &env{cfg: cfg, log: cfg.Logger, faults: map[string]int{},
		rng: &lockedRand{rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}} //nolint:gosec // a reproducible schedule, not a secret

	// Check what the run needs before starting anything.
	if _, err := findToxiproxy(); err != nil {
		return nil, err
	}
	if !cfg.NoRedis {
		if _, err := exec.LookPath("redis-server"); err != nil {
			return nil, errors.New("chaos: redis-server is not installed: run scripts/install-deps.sh (apt package redis-server), or pass -redis=false")
		}
	}
	if !cfg.NoNetns {
		if err := checkNetns(ctx); err != nil {
			return nil, err
		}
	}

	if e.dir = cfg.Dir; e.dir == "" {
		if e.dir, err = os.MkdirTemp("", "taskorch-chaos-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(e.dir, 0o755); err != nil { //nolint:gosec // the postgres user must enter it
		return nil, err
	}
	// As root, PostgreSQL runs as the postgres user, which must reach the data dir.
	if err := os.Chmod(e.dir, 0o755); err != nil { //nolint:gosec // a directory other users must enter
		return nil, err
	}
	e.log.Info("chaos: starting", "dir", e.dir, "tasks", cfg.Tasks, "duration", cfg.Duration, "seed", cfg.Seed)
	defer func() {
		e.teardown(ctx)
		passed := rep != nil && rep.Passed()
		if passed && !cfg.Keep && cfg.Dir == "" {
			_ = os.RemoveAll(e.dir)
		} else {
			e.log.Info("chaos: the run's logs are kept", "dir", e.dir)
		}
	}()
	if err := e.setup(ctx); err != nil {
		return nil, err
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go e.fleet.watch(runCtx)
	go e.progress(runCtx)
	prodDone := make(chan error, 1)
	go func() { prodDone <- e.prod.run(runCtx, cfg.Duration) }()

	if err := e.runPhases(runCtx); err != nil {
		return nil, err
	}
	if err := <-prodDone; err != nil {
		return nil, fmt.Errorf("chaos: producer: %w", err)
	}

	drainStart := time.Now()
	open, err := e.drain(runCtx)
	if err != nil {
		return nil, err
	}
	drained := time.Since(drainStart)
	cancel() // the watchdog must not start stopped workers again
	e.fleet.stopAll(15 * time.Second)

	exp, retries := e.prod.committed()
	res, err := Check(ctx, e.pool, exp)
	if err != nil {
		return nil, err
	}
	logs, err := e.fleet.countLogs()
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	kills := slices.Clone(e.kills)
	e.mu.Unlock()
	killReports, err := strandedTimes(ctx, e.pool, kills)
	if err != nil {
		return nil, err
	}
	rep = &Report{
		Tasks: cfg.Tasks, Workers: cfg.Workers, NetnsWorkers: len(e.netns), Seed: cfg.Seed,
		Faults: e.faults, Phases: e.phases, Result: res, Logs: logs,
		WorkersStarted: e.fleet.started, UnexpectedExits: e.fleet.unexpected, ProducerRetries: retries,
		OpenAfterDrain: open, Drain: drained, Wall: time.Since(begin), Dir: e.dir,
		Required: e.required(), Kills: killReports,
	}
	return rep, nil
}

// setup starts PostgreSQL, applies the schema, starts toxiproxy, Redis and the namespaces.
func (e *env) setup(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	settings := pgcluster.TestSettings()
	// A crash (SIGQUIT) must lose no acknowledged commit: WAL is written at commit (fsync stays
	// off: only an operating system crash could lose it, and the harness does not crash one).
	settings["synchronous_commit"] = "on"
	e.pgCfg = pgcluster.Config{DataDir: filepath.Join(e.dir, "pg"), Port: port, Settings: settings}
	if e.cluster, err = startPostgres(ctx, e.pgCfg); err != nil {
		return err
	}
	admin, err := pgxpool.New(ctx, e.cluster.URL("postgres"))
	if err != nil {
		return err
	}
	_, err = admin.Exec(ctx, `create database chaos`)
	admin.Close()
	if err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	if e.pool, err = pgxpool.New(ctx, e.cluster.URL("chaos")); err != nil {
		return err
	}
	if _, err := taskorch.Migrate(ctx, e.pool, &taskorch.MigrateOpts{Processes: []string{"comms"}}); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := e.pool.Exec(ctx, fixtureSQL); err != nil {
		return fmt.Errorf("the chaos schema: %w", err)
	}

	if e.proxy, err = startToxiproxy(ctx, filepath.Join(e.dir, "toxiproxy.log")); err != nil {
		return err
	}
	upstream := "127.0.0.1:" + strconv.Itoa(e.cluster.Port())
	proxyPort, err := freePort()
	if err != nil {
		return err
	}
	if err := e.proxy.createProxy(ctx, "pg", "127.0.0.1:"+strconv.Itoa(proxyPort), upstream); err != nil {
		return err
	}
	if !e.cfg.NoRedis {
		if e.redis, err = startRedis(ctx, e.dir); err != nil {
			return err
		}
	}
	if !e.cfg.NoNetns {
		for i := 1; i <= e.cfg.NetnsWorkers; i++ {
			n, err := newNetns(ctx, i)
			if err != nil {
				return err
			}
			e.netns = append(e.netns, n)
			// The namespace's only way to PostgreSQL: a listener on the host's end of its veth.
			p, err := freePort()
			if err != nil {
				return err
			}
			if err := e.proxy.createProxy(ctx, "pg-"+strconv.Itoa(i), n.hostIP+":"+strconv.Itoa(p), upstream); err != nil {
				return err
			}
			n.dbURL = fmt.Sprintf("postgres://postgres@%s:%d/chaos?sslmode=disable", n.hostIP, p)
		}
	}

	e.fleet = &fleet{bin: e.cfg.Binary, dir: e.dir, log: e.log, baseEnv: []string{
		"TASKORCH_MIGRATE=false",
		"TASKORCH_PROCESSES=comms",
		"TASKORCH_EMAIL_PROVIDER=outbox",
		"TASKORCH_TRANSPORT=postgres",
		"TASKORCH_CONCURRENCY=" + strconv.Itoa(e.cfg.Concurrency),
		"TASKORCH_LEASE_DURATION=" + e.cfg.LeaseDuration.String(),
		"TASKORCH_HEARTBEAT_INTERVAL=1s",
		"TASKORCH_WORKER_TIMEOUT=" + e.cfg.WorkerTimeout.String(),
		"TASKORCH_LEADER_TTL=5s",
		"TASKORCH_SHUTDOWN_GRACE=5s",
		"TASKORCH_LOG_FORMAT=json",
		"TASKORCH_LOG_LEVEL=info",
		chaosflow.EnvVar + "=true", // the durable Go workflows of the workload (chaosflow)
	}}
	e.pgProxyURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/chaos?sslmode=disable", proxyPort)
	e.prod = &producer{pool: e.pool, log: e.log, items: makeWorkload(e.cfg.Tasks, rand.New(rand.NewPCG(e.cfg.Seed, 1)))} //nolint:gosec // a reproducible workload
	return nil
}

// startPostgres starts the cluster, trying again for a while if the port is not free yet
// (after a restart).
func startPostgres(ctx context.Context, cfg pgcluster.Config) (*pgcluster.Cluster, error) {
	var err error
	for range 10 {
		var c *pgcluster.Cluster
		if c, err = pgcluster.Start(ctx, cfg); err == nil {
			return c, nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return nil, err
}

// teardown stops everything the run started (best effort).
func (e *env) teardown(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if e.fleet != nil {
		e.fleet.killAll()
	}
	if e.proxy != nil {
		e.proxy.stop()
	}
	if e.redis != nil {
		e.redis.stop()
	}
	for _, n := range e.netns {
		n.remove(ctx)
	}
	if e.pool != nil {
		e.pool.Close()
	}
	e.pgMu.Lock()
	if e.cluster != nil {
		if err := e.cluster.Stop(ctx); err != nil {
			e.log.Error("chaos: stopping PostgreSQL", "error", err)
		}
	}
	e.pgMu.Unlock()
}

func (e *env) setErr(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failed == nil {
		e.failed = err
	}
}

func (e *env) err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failed
}
