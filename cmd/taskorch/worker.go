package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/cmd/taskorch/internal/chaosflow"
	"github.com/taskorch/taskorch/cmd/taskorch/internal/failover"
	taskorchotel "github.com/taskorch/taskorch/contrib/otel"
	taskorchprom "github.com/taskorch/taskorch/contrib/prometheus"
	"github.com/taskorch/taskorch/internal/builtinhandlers"
	"github.com/taskorch/taskorch/webhooks"
)

// workerFlags are the worker's settings; each has an environment variable twin
// (docs/configuration.md), which is the flag's default.
type workerFlags struct {
	emailRate     float64 // claims per second of email tasks, set as a limit at start; 0: leave
	smsRate       float64 // the same for sms
	migrate       bool
	processes     []string
	tracing       string
	concurrency   int
	leaseDuration time.Duration
	taskTimeout   time.Duration
	warnRunning   string
	warnDefault   time.Duration
	warnTypes     map[string]time.Duration
	shutdownGrace time.Duration
	pollOnly      bool
	pollInterval  time.Duration
	maxPoll       time.Duration
	listenURL     string
	httpAddr      string
	transport     string
	workerID      string
	logFormat     string
	logLevel      string

	heartbeatInterval time.Duration
	workerTimeout     time.Duration
	sessionGrace      time.Duration
	leaderTTL         time.Duration
	retention         time.Duration
	failedRetention   time.Duration
	historyRetention  time.Duration

	providers *providerFlags // channel providers: worker_providers.go

	transports *transportFlags // redis, sqs: worker_transport.go

	httpTargets []string      // TYPE=URL: push workers (worker_push.go)
	httpTimeout time.Duration // bound on one push request
}

func newWorkerCmd(g *globals) *cobra.Command {
	f := &workerFlags{}
	var envErr error
	envBool := func(name string, def bool) bool {
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			return def
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			envErr = errors.Join(envErr, fmt.Errorf("%s=%q is not a boolean (true or false)", name, v))
		}
		return b
	}
	envInt := func(name string, def int) int {
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			envErr = errors.Join(envErr, fmt.Errorf("%s=%q is not a whole number", name, v))
		}
		return n
	}
	envDuration := func(name string, def time.Duration) time.Duration {
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			envErr = errors.Join(envErr, fmt.Errorf("%s=%q is not a Go duration such as 30s or 5m", name, v))
		}
		return d
	}
	envFloat := func(name string) float64 {
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			return 0
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			envErr = errors.Join(envErr, fmt.Errorf("%s=%q is not a number", name, v))
		}
		return x
	}
	envString := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	envList := func(name string) []string {
		var out []string
		for _, v := range strings.Split(os.Getenv(name), ",") {
			if v = strings.TrimSpace(v); v != "" {
				out = append(out, v)
			}
		}
		return out
	}

	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a worker: claim tasks and run them until SIGTERM or Ctrl-C",
		Long: `Runs a worker against DATABASE_URL. It runs db_function tasks through internal.run_function,
the built-in handlers (taskorch.noop, taskorch.sleep, taskorch.fail), and fails tasks of types it
has no handler for with a clear error. With --http-target it delivers the tasks of chosen types to
HTTP endpoints, in any language, as signed POSTs (docs/worker.md, "Push workers").

The first SIGTERM or Ctrl-C stops claiming and lets running tasks finish for the shutdown grace,
then gives what is left back to pending; a second one stops at once (still giving tasks back).

Every flag has an environment variable twin, listed in docs/configuration.md.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if envErr != nil {
				return &usageError{err: envErr}
			}
			var err error
			if f.warnDefault, f.warnTypes, err = parseWarnRunningAfter(f.warnRunning); err != nil {
				return err
			}
			return runWorker(cmd, g, f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.migrate, "migrate", envBool("TASKORCH_MIGRATE", true), "apply migrations at start (env TASKORCH_MIGRATE)")
	fl.StringSliceVar(&f.processes, "processes", envList("TASKORCH_PROCESSES"), "shipped processes to install with the migrations and check for readiness, e.g. comms,files,accounts (env TASKORCH_PROCESSES)")
	fl.IntVar(&f.concurrency, "concurrency", envInt("TASKORCH_CONCURRENCY", 10), "tasks run at once (env TASKORCH_CONCURRENCY)")
	fl.DurationVar(&f.leaseDuration, "lease-duration", envDuration("TASKORCH_LEASE_DURATION", 5*time.Minute), "how long a claim holds a task; renewed while it runs (env TASKORCH_LEASE_DURATION)")
	fl.DurationVar(&f.taskTimeout, "task-timeout", envDuration("TASKORCH_TASK_TIMEOUT", 0), "bound on one attempt, 0 for none (env TASKORCH_TASK_TIMEOUT)")
	fl.StringVar(&f.warnRunning, "warn-running-after", os.Getenv("TASKORCH_WARN_RUNNING_AFTER"), "warn (log and taskorch_tasks_running_long_total) when an attempt runs longer than this: a duration for every type, and/or TYPE=DURATION for one type (a negative one: never), comma-separated, e.g. 10m,comms.send_email=30s (env TASKORCH_WARN_RUNNING_AFTER)")
	fl.DurationVar(&f.shutdownGrace, "shutdown-grace", envDuration("TASKORCH_SHUTDOWN_GRACE", 30*time.Second), "how long running tasks may finish at shutdown (env TASKORCH_SHUTDOWN_GRACE)")
	fl.DurationVar(&f.pollInterval, "poll-interval", envDuration("TASKORCH_POLL_INTERVAL", 100*time.Millisecond), "the shortest wait between claims while idle; it doubles up to --max-poll-interval while nothing comes, and a NOTIFY cuts it short (env TASKORCH_POLL_INTERVAL)")
	fl.DurationVar(&f.maxPoll, "max-poll-interval", envDuration("TASKORCH_MAX_POLL_INTERVAL", 2*time.Second), "the longest wait between claims while idle (env TASKORCH_MAX_POLL_INTERVAL)")
	fl.BoolVar(&f.pollOnly, "poll-only", envBool("TASKORCH_POLL_ONLY", false), "no LISTEN/NOTIFY: for transaction-pooling proxies (env TASKORCH_POLL_ONLY)")
	// No default from the environment: a flag's default is printed by --help, and this URL may
	// hold a password. runWorker reads the variable.
	fl.StringVar(&f.listenURL, "listen-database-url", "", "a direct PostgreSQL URL (not through a pooler) for LISTEN, while DATABASE_URL goes through a transaction pooler (env TASKORCH_LISTEN_DATABASE_URL)")
	fl.StringVar(&f.httpAddr, "http-addr", envString("TASKORCH_HTTP_ADDR", ""), "serve /healthz, /readyz and /metrics here, e.g. 127.0.0.1:9090 (env TASKORCH_HTTP_ADDR)")
	fl.StringVar(&f.transport, "transport", envString("TASKORCH_TRANSPORT", "postgres"), "how task ids reach the worker: postgres, redis or sqs (env TASKORCH_TRANSPORT)")
	fl.StringVar(&f.tracing, "tracing", envString("TASKORCH_TRACING", "off"), "OpenTelemetry tracing of task runs: off or otlp (OTLP/HTTP, set by the standard OTEL_EXPORTER_OTLP_* variables) (env TASKORCH_TRACING)")
	fl.Float64Var(&f.emailRate, "email-rate", envFloat("TASKORCH_EMAIL_RATE"), "at start, limit email tasks to this many claims per second, for every worker (queues.set_limit; 0 leaves the limit as it is) (env TASKORCH_EMAIL_RATE)")
	fl.Float64Var(&f.smsRate, "sms-rate", envFloat("TASKORCH_SMS_RATE"), "at start, limit sms tasks to this many claims per second, for every worker (queues.set_limit; 0 leaves the limit as it is) (env TASKORCH_SMS_RATE)")
	fl.StringVar(&f.workerID, "worker-id", envString("TASKORCH_WORKER_ID", ""), "this worker's id (default hostname-pid-random) (env TASKORCH_WORKER_ID)")
	fl.StringVar(&f.logFormat, "log-format", envString("TASKORCH_LOG_FORMAT", "text"), "text or json (env TASKORCH_LOG_FORMAT)")
	fl.StringVar(&f.logLevel, "log-level", envString("TASKORCH_LOG_LEVEL", "info"), "debug, info, warn or error (env TASKORCH_LOG_LEVEL)")
	fl.DurationVar(&f.heartbeatInterval, "heartbeat-interval", envDuration("TASKORCH_HEARTBEAT_INTERVAL", 5*time.Second), "how often the worker updates its row in queues.worker (env TASKORCH_HEARTBEAT_INTERVAL)")
	fl.DurationVar(&f.workerTimeout, "worker-timeout", envDuration("TASKORCH_WORKER_TIMEOUT", 30*time.Second), "a worker silent this long is reaped and its tasks recovered (env TASKORCH_WORKER_TIMEOUT)")
	fl.DurationVar(&f.sessionGrace, "session-grace", envDuration("TASKORCH_SESSION_GRACE", time.Second), "a crashed worker's running tasks go back to pending once its database session has been gone this long; negative for no grace (env TASKORCH_SESSION_GRACE)")
	fl.DurationVar(&f.leaderTTL, "leader-ttl", envDuration("TASKORCH_LEADER_TTL", 15*time.Second), "the leader's lease (env TASKORCH_LEADER_TTL)")
	fl.DurationVar(&f.retention, "retention", envDuration("TASKORCH_RETENTION", 7*24*time.Hour), "keep completed/cancelled tasks this long; negative keeps forever (env TASKORCH_RETENTION)")
	fl.DurationVar(&f.failedRetention, "failed-retention", envDuration("TASKORCH_FAILED_RETENTION", 30*24*time.Hour), "keep failed/dead tasks this long; negative keeps forever (env TASKORCH_FAILED_RETENTION)")
	fl.DurationVar(&f.historyRetention, "history-retention", envDuration("TASKORCH_HISTORY_RETENTION", 0), "keep the lease and event history this long, dropped a whole UTC day at a time; 0 is the larger of --retention and --failed-retention; negative keeps forever (env TASKORCH_HISTORY_RETENTION)")
	// No default from the environment: a flag's default is printed by --help, and a URL may hold
	// a password. pushTargets reads the variable.
	fl.StringArrayVar(&f.httpTargets, "http-target", nil, "push the tasks of a type to an HTTP endpoint: TYPE=URL, repeatable (docs/worker.md, \"Push workers\"); signed with TASKORCH_HTTP_TARGET_SECRETS (env TASKORCH_HTTP_TARGETS, comma-separated)")
	fl.DurationVar(&f.httpTimeout, "http-timeout", envDuration("TASKORCH_HTTP_TIMEOUT", 30*time.Second), "bound on one push request (--http-target): the attempt fails and is retried (env TASKORCH_HTTP_TIMEOUT)")
	f.providers = addProviderFlags(fl)
	f.transports = addTransportFlags(fl)
	return cmd
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErrorf("log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		opts.ReplaceAttr = durationSeconds
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageErrorf("log format %q: want text or json", format)
}

// durationSeconds writes a duration in a JSON log line as a number of seconds ("grace":30,
// "retry_in":0.25), not slog's default of nanoseconds (docs/configuration.md, "Logs").
func durationSeconds(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.Float64Value(a.Value.Duration().Seconds())
	}
	return a
}

func runWorker(cmd *cobra.Command, g *globals, f *workerFlags) error {
	log, err := newLogger(os.Stderr, f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	// A provider that cannot work stops the worker here, before it connects to anything,
	// rather than failing every task of its channel later.
	if err := f.providers.check(); err != nil {
		return err
	}
	chaosFlows, err := chaosWorkflowsEnabled()
	if err != nil {
		return err
	}
	push, err := f.pushTargets()
	if err != nil {
		return err
	}
	tr, err := f.transports.build(cmd.Context(), f.transport)
	if err != nil {
		return err
	}
	// The worker closes its transport when it runs (Run); an early return closes it here.
	unused := tr
	defer func() {
		if unused != nil {
			_ = unused.Close()
		}
	}()
	if f.concurrency < 1 {
		return usageErrorf("concurrency must be at least 1, got %d", f.concurrency)
	}
	if f.pollInterval < time.Millisecond || f.maxPoll < f.pollInterval {
		return usageErrorf("--poll-interval must be at least 1ms and --max-poll-interval at least --poll-interval, got %s and %s", f.pollInterval, f.maxPoll)
	}
	if g.databaseURL == "" {
		return usageErrorf("no database: set DATABASE_URL or pass --database-url")
	}
	cfg, err := pgxpool.ParseConfig(g.databaseURL)
	if err != nil {
		return usageErrorf("DATABASE_URL is not a valid PostgreSQL URL: %v", redact(err))
	}
	// One a slot (a db_function holds one while it runs), and the listener's, the claim's, the
	// two completers', the lease renewer's and checker's, and one for the rest.
	cfg.MaxConns = int32(min(f.concurrency+7, 1000)) //nolint:gosec // bounded
	// With a multi-host URL, a former primary that came back after a failover is refused.
	failover.NewGuard(log).Install(&cfg.ConnConfig.Config)
	// If this process dies mid-statement (SIGKILL, a lost machine), PostgreSQL notices within
	// seconds instead of when the statement ends, and releases the task's row lock so the
	// task can be recovered once its lease expires. PostgreSQL 14+; ignored before.
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "set client_connection_check_interval = '2s'")
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42704" { // unrecognized parameter: PostgreSQL < 14
			return nil
		}
		return err
	}
	if f.listenURL == "" {
		f.listenURL = os.Getenv("TASKORCH_LISTEN_DATABASE_URL")
	}
	var listenCfg *pgx.ConnConfig
	if f.listenURL != "" {
		if f.pollOnly {
			return usageErrorf("--poll-only and --listen-database-url (TASKORCH_LISTEN_DATABASE_URL) exclude each other: poll only, or LISTEN on the direct connection")
		}
		listenCfg, err = pgx.ParseConfig(f.listenURL)
		if err != nil {
			return usageErrorf("TASKORCH_LISTEN_DATABASE_URL is not a valid PostgreSQL URL: %v", redact(err))
		}
	}
	if f.pollOnly || listenCfg != nil {
		// Behind a transaction-pooling proxy: no prepared statements, no session state.
		unnamedStatements(cfg, g.databaseURL)
	}

	// The first signal stops the worker gracefully; the second cuts the grace short.
	ctx, stop := context.WithCancel(cmd.Context())
	defer stop()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	pool, err := pgxpool.NewWithConfig(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", redact(err))
	}
	defer pool.Close()
	channels, err := f.providers.channels(pool, log)
	if err != nil {
		return err
	}
	if err := waitForDatabase(ctx, pool, log); err != nil {
		return err
	}
	if f.migrate {
		applied, err := taskorch.Migrate(ctx, pool, &taskorch.MigrateOpts{Processes: f.processes})
		if err != nil {
			return fmt.Errorf("migrate (set TASKORCH_MIGRATE=false if this user may not): %w", err)
		}
		if len(applied) > 0 {
			log.Info("applied migrations", "migrations", applied)
		}
	}

	if err := applyChannelRates(ctx, pool, f, log); err != nil {
		return err
	}

	hs := taskorch.NewHandlers()
	builtinhandlers.Register(hs)
	if chaosFlows {
		chaosflow.Register(hs, pool)
	}
	if err := registerPush(hs, pool, push, f, log); err != nil {
		return err
	}
	// The worker's metrics, with the Go runtime's and the process's, served on /metrics.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	tp, stopTracing, err := newTracerProvider(ctx, f.tracing, f.workerID, currentBuild().Version)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = stopTracing(sctx)
	}()
	// The metrics and the traces watch the worker from outside the library (contrib/prometheus,
	// contrib/otel).
	observers := []taskorch.Observer{taskorchprom.New(reg)}
	if tp != nil {
		observers = append(observers, taskorchotel.New(tp))
	}
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		Observers:             observers,
		ID:                    f.workerID,
		Concurrency:           f.concurrency,
		LeaseDuration:         f.leaseDuration,
		TaskTimeout:           f.taskTimeout,
		WarnRunningAfter:      f.warnDefault,
		WarnRunningAfterTypes: f.warnTypes,
		ShutdownGrace:         f.shutdownGrace,
		PollOnly:              f.pollOnly,
		PollInterval:          f.pollInterval,
		MaxPollInterval:       f.maxPoll,
		ListenConfig:          listenCfg,
		Handlers:              hs,
		Channels:              channels,
		Logger:                log,
		Version:               currentBuild().Version,

		HeartbeatInterval: f.heartbeatInterval,
		WorkerTimeout:     f.workerTimeout,
		SessionGrace:      f.sessionGrace,
		LeaderTTL:         f.leaderTTL,
		Retention:         f.retention,
		FailedRetention:   f.failedRetention,
		HistoryRetention:  f.historyRetention,

		Transport:       tr,
		RedispatchAfter: f.transports.redispatchAfter,
	})
	if err != nil {
		return err
	}
	// draining is set at the first signal: the worker claims nothing more and finishes what it
	// runs, and /readyz says so.
	var draining atomic.Bool
	if f.httpAddr != "" {
		// The providers' delivery callbacks, next to the health routes: each route answers 404
		// until its secret is set (docs/providers.md, "Delivery webhooks").
		hooks, err := webhooks.NewHandler(pool, webhookConfig(f.providers.lookup, log))
		if err != nil {
			return usageErrorf("%v", err)
		}
		srv, err := serveHealth(f.httpAddr, pool, &taskorch.MigrateOpts{Processes: f.processes}, reg, hooks, &draining, log)
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
	}
	// The signal is waited for on sigs alone: the command's context (main) is cancelled by the
	// same signal, and a select on it as well could take that branch and never log the stop,
	// mark the worker draining, or see the second signal.
	runDone := make(chan struct{})
	go func() {
		select {
		case <-sigs:
		case <-runDone:
			return
		}
		draining.Store(true) // /readyz answers 503 from here on
		log.Info("stopping: finishing running tasks (signal again to stop at once)", "grace", f.shutdownGrace)
		stop()
		select {
		case <-sigs:
			log.Warn("stopping at once")
			w.HardStop()
		case <-time.After(f.shutdownGrace + 10*time.Second):
		}
	}()
	unused = nil
	defer close(runDone)
	return w.Run(ctx)
}

// waitForDatabase pings until the database answers (it may be starting too), up to a minute.
func waitForDatabase(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	deadline := time.Now().Add(time.Minute)
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := pool.Ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		standbys := errors.Is(err, pgconn.ErrReadOnlyConnection) || errors.Is(err, pgconn.ErrStandbyConnection)
		if time.Now().After(deadline) || ctx.Err() != nil {
			if standbys {
				return fmt.Errorf("no host of DATABASE_URL accepts writes (each one reached is a standby or read-only; "+
					"target_session_attrs=read-write refuses them): %w", redact(err))
			}
			return fmt.Errorf("cannot reach the database: %w", redact(err))
		}
		if standbys {
			log.Warn("database not reachable yet; retrying: no host of DATABASE_URL accepts writes yet (a standby, or read-only), waiting for a primary",
				"error", redact(err))
		} else {
			log.Warn("database not reachable yet; retrying", "error", redact(err))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// serveHealth serves /healthz (the process lives: "ok", or "draining" during a graceful stop,
// 200 either way so that a liveness probe does not kill a worker finishing its tasks), /readyz
// (the database answers and the migrations are applied, and the worker is not draining: 503
// from the first signal on), /metrics (reg, in the Prometheus text format) and the webhook
// routes (hooks, under /webhooks/) on addr.
func serveHealth(addr string, pool *pgxpool.Pool, migrations *taskorch.MigrateOpts, reg *prometheus.Registry,
	hooks *webhooks.Handler, draining *atomic.Bool, log *slog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usageErrorf("--http-addr %s: %v", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if draining.Load() {
			_, _ = w.Write([]byte("draining\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if draining.Load() {
			http.Error(w, "not ready: draining (finishing running tasks, claiming no more)", http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := taskorch.CheckMigrations(ctx, pool, migrations); err != nil {
			http.Error(w, "not ready: "+redact(err).Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError)}))
	mux.Handle("/webhooks/", hooks)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("health server stopped", "error", err)
		}
	}()
	log.Info("serving /healthz, /readyz, /metrics and /webhooks/", "addr", ln.Addr().String(), "webhooks", hooks.Routes())
	return srv, nil
}

// applyChannelRates sets the rate limits --email-rate and --sms-rate ask for (docs/limits.md):
// the limit is the database's, so it holds for every worker, and the last worker to start
// with a rate sets it. A rate of 0 leaves the channel's limit as it is.
func applyChannelRates(ctx context.Context, pool *pgxpool.Pool, f *workerFlags, log *slog.Logger) error {
	if f.emailRate == 0 && f.smsRate == 0 {
		return nil
	}
	c, err := taskorch.NewClient(pool, nil)
	if err != nil {
		return err
	}
	limits, err := c.Limits(ctx)
	if err != nil {
		return fmt.Errorf("--email-rate/--sms-rate: read the limits: %w", err)
	}
	for _, r := range []struct {
		channel, flag string
		rate          float64
	}{{taskorch.TypeEmail, "email-rate", f.emailRate}, {taskorch.TypeSMS, "sms-rate", f.smsRate}} {
		if r.rate == 0 {
			continue
		}
		if r.rate < 0 {
			return usageErrorf("--%s must not be negative, got %v", r.flag, r.rate)
		}
		// The rest of a limit set otherwise (running slots, burst, key) stays.
		p := taskorch.LimitParams{TaskType: r.channel, RatePerSecond: r.rate}
		for _, l := range limits {
			if l.TaskType == r.channel {
				p.MaxRunning, p.Burst, p.KeyField = l.MaxRunning, l.Burst, l.KeyField
			}
		}
		if err := c.SetLimit(ctx, &p); err != nil {
			return fmt.Errorf("--%s: set the %s limit (this database user may not: set it once with taskorch limits set and drop the flag): %w",
				r.flag, r.channel, err)
		}
		log.Info("channel rate limit set", "channel", r.channel, "per_second", r.rate)
	}
	return nil
}

// parseWarnRunningAfter reads --warn-running-after: comma-separated, a duration for every type
// and TYPE=DURATION entries for single types ("10m,comms.send_email=30s").
func parseWarnRunningAfter(v string) (time.Duration, map[string]time.Duration, error) {
	var all time.Duration
	var byType map[string]time.Duration
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		typ, ds, named := strings.Cut(e, "=")
		d, err := time.ParseDuration(strings.TrimSpace(ds))
		if !named {
			d, err = time.ParseDuration(e)
		}
		if err != nil || (named && strings.TrimSpace(typ) == "") {
			return 0, nil, usageErrorf("--warn-running-after: %q is not a duration or TYPE=DURATION (e.g. 10m,comms.send_email=30s)", e)
		}
		if !named {
			all = d
			continue
		}
		if byType == nil {
			byType = map[string]time.Duration{}
		}
		byType[strings.TrimSpace(typ)] = d
	}
	return all, byType, nil
}
